// Scalar: a number passed to an op (fill value, clamp bound, `x + 2`), kept exact for int64.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace ember {

class Scalar {
 public:
  Scalar() : kind_(Kind::Int), int_(0) {}
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  Scalar(T value) {  // NOLINT: implicit like PyTorch's Scalar
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::Bool;
      int_ = value ? 1 : 0;
    } else if constexpr (std::is_integral_v<T>) {
      kind_ = Kind::Int;
      int_ = static_cast<int64_t>(value);
    } else {
      kind_ = Kind::Float;
      float_ = static_cast<double>(value);
    }
  }
  Scalar(BFloat16 value) : kind_(Kind::Float), float_(static_cast<float>(value)) {}  // NOLINT
  Scalar(Half value) : kind_(Kind::Float), float_(static_cast<float>(value)) {}      // NOLINT

  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  double to_double() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
  int64_t to_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(float_) : int_; }
  template <typename T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>)
      return kind_ == Kind::Float ? float_ != 0.0 : int_ != 0;
    else if constexpr (std::is_integral_v<T>)
      return static_cast<T>(to_int());
    else
      return static_cast<T>(static_cast<ComputeType<T>>(to_double()));
  }
  // The dtype a tensor made from this scalar would have on its own.
  DType natural_dtype() const { return kind_ == Kind::Float ? kFloat64 : (kind_ == Kind::Bool ? kBool : kInt64); }

 private:
  enum class Kind : uint8_t { Float, Int, Bool };
  Kind kind_;
  union {
    double float_;
    int64_t int_;
  };
};

}  // namespace ember
