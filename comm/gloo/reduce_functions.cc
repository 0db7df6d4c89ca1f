#include "comm/gloo/reduce_functions.h"

#include <algorithm>

#include "core/half.h"

namespace ember::comm::gloo_backend {

namespace {

enum Which { kSum, kMin, kMax, kProduct };

template <typename T, Which W>
T combine(T x, T y) {
  if constexpr (std::is_same_v<T, bool>) {
    return (W == kMin || W == kProduct) ? (x && y) : (x || y);
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(combine<float, W>(static_cast<float>(x), static_cast<float>(y)));
  } else if constexpr (W == kSum) {
    return static_cast<T>(x + y);
  } else if constexpr (W == kMin) {
    return std::min(x, y);
  } else if constexpr (W == kMax) {
    return std::max(x, y);
  } else {
    return static_cast<T>(x * y);
  }
}

template <typename T, Which W>
void combine_all(void* c_, const void* a_, const void* b_, size_t n) {
  T* c = static_cast<T*>(c_);
  const T* a = static_cast<const T*>(a_);
  const T* b = static_cast<const T*>(b_);
  for (size_t i = 0; i < n; ++i) c[i] = combine<T, W>(a[i], b[i]);
}

template <typename T>
ReduceFunction for_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return &combine_all<T, kSum>;
    case ReduceOp::Min:
      return &combine_all<T, kMin>;
    case ReduceOp::Max:
      return &combine_all<T, kMax>;
    case ReduceOp::Product:
      return &combine_all<T, kProduct>;
  }
  return nullptr;
}

}  // namespace

ReduceFunction reduce_function(ReduceOp op, DType dtype) {
  ReduceFunction f = nullptr;
  EMBER_DISPATCH_ALL(dtype, "gloo reduction", [&] { f = for_op<scalar_t>(op); });
  return f;
}

}  // namespace ember::comm::gloo_backend
