// The gradient scaler's unscale of one element, shared by the CPU and CUDA amp_unscale kernels:
// PyTorch's _amp_foreach_non_finite_check_and_unscale_ (16-bit values computed in float, float64
// in double with the float32 factor widened).
#pragma once

#include <cstdint>

#include "core/half.h"
#include "core/host_device.h"

namespace ember::formula {

// Inf and NaN are the values whose exponent bits are all ones.
EMBER_HOST_DEVICE inline bool is_finite_value(float value) {
  return (float_to_bits(value) & 0x7f800000u) != 0x7f800000u;
}

EMBER_HOST_DEVICE inline bool is_finite_value(double value) {
#if defined(__CUDA_ARCH__)
  const uint64_t word = static_cast<uint64_t>(__double_as_longlong(value));
#else
  uint64_t word;
  std::memcpy(&word, &value, sizeof(word));
#endif
  return (word & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}

// The arithmetic type of an element: float for the 16-bit types, the type itself otherwise.
template <typename T>
struct UnscaleCompute {
  using type = T;
};
template <>
struct UnscaleCompute<BFloat16> {
  using type = float;
};
template <>
struct UnscaleCompute<Half> {
  using type = float;
};

// value * inv_scale, rounded to T; `non_finite` becomes true when value is an inf or a NaN.
template <typename T>
EMBER_HOST_DEVICE inline T unscale_element(T value, float inv_scale, bool& non_finite) {
  using C = typename UnscaleCompute<T>::type;
  const C v = static_cast<C>(value);
  non_finite |= !is_finite_value(v);
  return static_cast<T>(v * static_cast<C>(inv_scale));
}

}  // namespace ember::formula
