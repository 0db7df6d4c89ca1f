// The CPU backend's neural-net kernel-table entries (registered in cpu_backend.cc).
#pragma once

#include <utility>

#include "core/backend.h"

namespace ember::cpu {

// oneDNN convolutions (core/cpu/dnnl/conv.cc): outputs channels-last; dtypes or problems oneDNN
// does not take go to ember::cpu::reference.
Tensor conv2d_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p);
Tensor conv2d_backward_input_kernel(const Tensor& grad_output, const Tensor& weight, const Shape& input_shape,
                                    const ConvParams& p);
std::pair<Tensor, Tensor> conv2d_backward_weight_kernel(const Tensor& grad_output, const Tensor& input,
                                                        const Shape& weight_shape, bool want_bias,
                                                        const ConvParams& p);

std::pair<Tensor, Tensor> max_pool2d_kernel(const Tensor& input, const PoolParams& p);
Tensor max_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& indices, const Shape& input_shape,
                                  const PoolParams& p);
Tensor avg_pool2d_kernel(const Tensor& input, const PoolParams& p);
Tensor avg_pool2d_backward_kernel(const Tensor& grad_output, const Shape& input_shape, const PoolParams& p);
Tensor adaptive_avg_pool2d_kernel(const Tensor& input, int64_t out_h, int64_t out_w);
Tensor adaptive_avg_pool2d_backward_kernel(const Tensor& grad_output, const Shape& input_shape);

std::pair<Tensor, Tensor> batch_norm_stats_kernel(const Tensor& input);
Tensor batch_norm_apply_kernel(const Tensor& input, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                               const Tensor& bias, bool relu);
std::pair<Tensor, Tensor> batch_norm_backward_reduce_kernel(const Tensor& grad_output, const Tensor& input,
                                                            const Tensor& mean, const Tensor& relu_output);
Tensor batch_norm_backward_input_kernel(const Tensor& grad_output, const Tensor& input, const Tensor& mean,
                                        const Tensor& invstd, const Tensor& weight, const Tensor& sum_dy,
                                        const Tensor& sum_dy_xmu, int64_t count, const Tensor& relu_output);

Tensor softmax_kernel(const Tensor& input, int64_t dim, bool log);
Tensor softmax_backward_kernel(const Tensor& grad_output, const Tensor& output, int64_t dim, bool log);

void gather_kernel(const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index);
void scatter_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace ember::cpu
