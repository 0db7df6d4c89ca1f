// The per-element formulas of batch norm, shared by the CPU kernels (core/cpu) and the CUDA kernels
// (cuda/kernels): the affine apply with its fused ReLU, and the input gradient, each folded into
// per-channel coefficients once so that the pass over every element is one multiply-add or two.
// C is the compute type: float for f32/bf16/f16, double for f64. EMBER_HOST_DEVICE throughout.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace ember::formula {

// y = (x - mean) * invstd * weight + bias  ==  x * scale + shift.
template <typename C>
struct BatchNormAffine {
  C scale, shift;
};

// An undefined weight or bias is 1 or 0: pass those.
template <typename C>
EMBER_HOST_DEVICE inline BatchNormAffine<C> batch_norm_affine(C mean, C invstd, C weight, C bias) {
  const C scale = invstd * weight;
  return {scale, bias - mean * scale};
}

// The normalised value, then max(y, 0) when the ReLU is fused in. Written as a select so that NaN
// passes through (as the ReLU op lets it) and GCC vectorises it.
template <typename C>
EMBER_HOST_DEVICE inline C batch_norm_output(C x, C scale, C shift, bool relu) {
  const C y = x * scale + shift;
  return relu && y < C(0) ? C(0) : y;
}

// dx = (dy - sum_dy / count - (x - mean) * invstd^2 * sum_dy_xmu / count) * invstd * weight
//    == dy * k - x * a - b. The coefficients are formed in double (they combine sums over the whole
// batch) and rounded once to C.
template <typename C>
struct BatchNormInputGrad {
  C k, a, b;
};

template <typename C>
EMBER_HOST_DEVICE inline BatchNormInputGrad<C> batch_norm_input_grad(double mean, double invstd, double weight,
                                                                     double sum_dy, double sum_dy_xmu, int64_t count) {
  const double k = invstd * weight;
  const double a = k * invstd * invstd * sum_dy_xmu / static_cast<double>(count);
  const double b = k * sum_dy / static_cast<double>(count) - mean * a;
  return {static_cast<C>(k), static_cast<C>(a), static_cast<C>(b)};
}

// One element of dx; `dy` already masked by the fused ReLU where there was one (keep_where_positive).
template <typename C>
EMBER_HOST_DEVICE inline C batch_norm_input_grad_element(C dy, C x, C k, C a, C b) {
  return dy * k - x * a - b;
}

}  // namespace ember::formula
