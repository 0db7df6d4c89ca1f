// The per-element formulas of softmax and log-softmax along one dim, forward and backward, shared by
// the CPU kernels (core/cpu) and the CUDA kernels (cuda/kernels). A row is shifted by its max so
// that exp() never overflows; exponentials and the row sums are taken in double, the results
// rounded to the compute type C (float for f32/bf16/f16, double for f64). EMBER_HOST_DEVICE.
#pragma once

#include <limits>

#include "core/elementwise_math.h"

namespace ember::formula {

// The running max of a row, ignoring NaN (a NaN still makes the whole row NaN through the sum).
// Starts from -inf.
template <typename C>
EMBER_HOST_DEVICE inline C softmax_max(C max, C x) {
  return x > max ? x : max;
}

// The shift from the row's max: 0 for a row of -inf, so that exp(-inf - shift) is 0, not NaN.
template <typename C>
EMBER_HOST_DEVICE inline C softmax_shift(C max) {
  return max == -std::numeric_limits<C>::infinity() ? C(0) : max;
}

// One term of the row's normaliser sum(exp(x - shift)).
template <typename C>
EMBER_HOST_DEVICE inline double softmax_term(C x, C shift) {
  return libm::exp(static_cast<double>(x - shift));
}

// softmax: exp(x - shift) / sum, with `inverse_total` = 1 / sum.
template <typename C>
EMBER_HOST_DEVICE inline C softmax_output(C x, C shift, double inverse_total) {
  return static_cast<C>(softmax_term(x, shift) * inverse_total);
}

// log-softmax: x - shift - log(sum), with `log_total` = log(sum) rounded to C.
template <typename C>
EMBER_HOST_DEVICE inline C log_softmax_output(C x, C shift, C log_total) {
  return x - shift - log_total;
}

// The backward from the forward output y and the upstream gradient g. Each row first sums
// `softmax_backward_term` (in double), then every element is `softmax_backward_element` of that sum:
//   softmax:      dx = y (g - sum(g y))
//   log-softmax:  dx = g - exp(y) sum(g)
template <typename C>
EMBER_HOST_DEVICE inline double softmax_backward_term(C g, C y, bool log) {
  return log ? static_cast<double>(g) : static_cast<double>(g) * static_cast<double>(y);
}

template <typename C>
EMBER_HOST_DEVICE inline C softmax_backward_element(C g, C y, double sum, bool log) {
  return log ? static_cast<C>(static_cast<double>(g) - libm::exp(static_cast<double>(y)) * sum)
             : static_cast<C>(static_cast<double>(y) * (static_cast<double>(g) - sum));
}

}  // namespace ember::formula
