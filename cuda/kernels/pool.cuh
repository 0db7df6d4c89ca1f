// Pooling on CUDA devices: max (with PyTorch's int64 indices into each H*W plane), average and
// adaptive average, forward and backward. Inputs of any layout; outputs are NCHW-contiguous.
#pragma once

#include <utility>

#include "core/backend.h"

namespace ember::cuda {

std::pair<Tensor, Tensor> max_pool2d_kernel(const Tensor& input, const PoolParams& p);
Tensor max_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& indices, const Shape& input_shape,
                                  const PoolParams& p);
Tensor avg_pool2d_kernel(const Tensor& input, const PoolParams& p);
Tensor avg_pool2d_backward_kernel(const Tensor& grad_output, const Shape& input_shape, const PoolParams& p);
Tensor adaptive_avg_pool2d_kernel(const Tensor& input, int64_t out_h, int64_t out_w);
Tensor adaptive_avg_pool2d_backward_kernel(const Tensor& grad_output, const Shape& input_shape);

}  // namespace ember::cuda
