// The simple convolution path: im2col / col2im around GEMM, on contiguous NCHW float32/float64.
// It is the reference the fast (oneDNN) path is tested against, and the fallback for shapes or
// dtypes the fast path does not take.
#pragma once

#include <utility>

#include "core/backend.h"

namespace ember::cpu::reference {

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p);
Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Shape& input_shape,
                             const ConvParams& p);
std::pair<Tensor, Tensor> conv2d_backward_weight(const Tensor& grad_output, const Tensor& input,
                                                 const Shape& weight_shape, bool want_bias, const ConvParams& p);

}  // namespace ember::cpu::reference
