// Element types. DType is a tag; TypeOf<DType> and dtype_of<T>() map between tags and C++ types,
// and EMBER_DISPATCH_* expand a body once per supported C++ type.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "core/half.h"

namespace ember {

enum class DType : uint8_t { Float32, Float64, BFloat16, Float16, Int64, Int32, UInt8, Bool };

constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
constexpr DType kBFloat16 = DType::BFloat16;
constexpr DType kFloat16 = DType::Float16;
constexpr DType kInt64 = DType::Int64;
constexpr DType kInt32 = DType::Int32;
constexpr DType kUInt8 = DType::UInt8;
constexpr DType kBool = DType::Bool;
constexpr int kNumDTypes = 8;

size_t element_size(DType dtype);
const char* dtype_name(DType dtype);  // "float32", "int64", ...
bool is_floating(DType dtype);
bool is_integral(DType dtype);  // integers and bool
// The type PyTorch's promotion rules give a binary op between tensors of these dtypes.
DType promote_types(DType a, DType b);
std::ostream& operator<<(std::ostream& out, DType dtype);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return kFloat32;
}
template <>
constexpr DType dtype_of<double>() {
  return kFloat64;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return kBFloat16;
}
template <>
constexpr DType dtype_of<Half>() {
  return kFloat16;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return kInt64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return kInt32;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return kUInt8;
}
template <>
constexpr DType dtype_of<bool>() {
  return kBool;
}

template <DType D>
struct TypeOfImpl;
template <>
struct TypeOfImpl<kFloat32> {
  using type = float;
};
template <>
struct TypeOfImpl<kFloat64> {
  using type = double;
};
template <>
struct TypeOfImpl<kBFloat16> {
  using type = BFloat16;
};
template <>
struct TypeOfImpl<kFloat16> {
  using type = Half;
};
template <>
struct TypeOfImpl<kInt64> {
  using type = int64_t;
};
template <>
struct TypeOfImpl<kInt32> {
  using type = int32_t;
};
template <>
struct TypeOfImpl<kUInt8> {
  using type = uint8_t;
};
template <>
struct TypeOfImpl<kBool> {
  using type = bool;
};
template <DType D>
using TypeOf = typename TypeOfImpl<D>::type;

// Arithmetic type used to compute on T: float for the 16-bit floats, T otherwise.
template <typename T>
struct ComputeTypeImpl {
  using type = T;
};
template <>
struct ComputeTypeImpl<BFloat16> {
  using type = float;
};
template <>
struct ComputeTypeImpl<Half> {
  using type = float;
};
template <typename T>
using ComputeType = typename ComputeTypeImpl<T>::type;

namespace detail {
[[noreturn]] void unsupported_dtype(const char* op, DType dtype);
}

}  // namespace ember

#define EMBER_DTYPE_CASE(D, ...)         \
  case D: {                              \
    using scalar_t = ::ember::TypeOf<D>; \
    __VA_ARGS__();                       \
    break;                               \
  }

// Runs the lambda body `__VA_ARGS__` with `scalar_t` bound to the C++ type of `dtype`.
#define EMBER_DISPATCH_FLOATING(dtype, op_name, ...)      \
  switch (dtype) {                                        \
    EMBER_DTYPE_CASE(::ember::kFloat32, __VA_ARGS__)      \
    EMBER_DTYPE_CASE(::ember::kFloat64, __VA_ARGS__)      \
    EMBER_DTYPE_CASE(::ember::kBFloat16, __VA_ARGS__)     \
    EMBER_DTYPE_CASE(::ember::kFloat16, __VA_ARGS__)      \
    default:                                              \
      ::ember::detail::unsupported_dtype(op_name, dtype); \
  }

#define EMBER_DISPATCH_ALL(dtype, op_name, ...)           \
  switch (dtype) {                                        \
    EMBER_DTYPE_CASE(::ember::kFloat32, __VA_ARGS__)      \
    EMBER_DTYPE_CASE(::ember::kFloat64, __VA_ARGS__)      \
    EMBER_DTYPE_CASE(::ember::kBFloat16, __VA_ARGS__)     \
    EMBER_DTYPE_CASE(::ember::kFloat16, __VA_ARGS__)      \
    EMBER_DTYPE_CASE(::ember::kInt64, __VA_ARGS__)        \
    EMBER_DTYPE_CASE(::ember::kInt32, __VA_ARGS__)        \
    EMBER_DTYPE_CASE(::ember::kUInt8, __VA_ARGS__)        \
    EMBER_DTYPE_CASE(::ember::kBool, __VA_ARGS__)         \
    default:                                              \
      ::ember::detail::unsupported_dtype(op_name, dtype); \
  }

// Numeric types (no bool): arithmetic that has no meaning on bool.
#define EMBER_DISPATCH_NUMERIC(dtype, op_name, ...)       \
  switch (dtype) {                                        \
    EMBER_DTYPE_CASE(::ember::kFloat32, __VA_ARGS__)      \
    EMBER_DTYPE_CASE(::ember::kFloat64, __VA_ARGS__)      \
    EMBER_DTYPE_CASE(::ember::kBFloat16, __VA_ARGS__)     \
    EMBER_DTYPE_CASE(::ember::kFloat16, __VA_ARGS__)      \
    EMBER_DTYPE_CASE(::ember::kInt64, __VA_ARGS__)        \
    EMBER_DTYPE_CASE(::ember::kInt32, __VA_ARGS__)        \
    EMBER_DTYPE_CASE(::ember::kUInt8, __VA_ARGS__)        \
    default:                                              \
      ::ember::detail::unsupported_dtype(op_name, dtype); \
  }
