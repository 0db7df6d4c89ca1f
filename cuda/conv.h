// conv2d on CUDA devices as im2col + GEMM (cuda/kernels/im2col.cuh, cuda/blas.h): forward,
// backward-data and backward-weight, with stride, padding, dilation and groups. Inputs of any
// layout are read as contiguous NCHW; outputs are NCHW.
#pragma once

#include <utility>

#include "core/backend.h"

namespace ember::cuda {

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p);
Tensor conv2d_backward_input(const Tensor& grad_output, const Tensor& weight, const Shape& input_shape,
                             const ConvParams& p);
std::pair<Tensor, Tensor> conv2d_backward_weight(const Tensor& grad_output, const Tensor& input,
                                                 const Shape& weight_shape, bool want_bias, const ConvParams& p);

}  // namespace ember::cuda
