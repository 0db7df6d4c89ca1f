// Batch norm over dim 1 of [N, C, *] on a CUDA device: the kernel-table entries (core/backend.h),
// kept in the same four parts as on the CPU so that SyncBatchNorm can combine the statistics and
// the backward's sums across processes between them.
#pragma once

#include <utility>

#include "core/backend.h"

namespace ember::cuda {

std::pair<Tensor, Tensor> batch_norm_stats_kernel(const Tensor& input);
Tensor batch_norm_apply_kernel(const Tensor& input, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                               const Tensor& bias, bool relu);
std::pair<Tensor, Tensor> batch_norm_backward_reduce_kernel(const Tensor& grad_output, const Tensor& input,
                                                            const Tensor& mean, const Tensor& relu_output);
Tensor batch_norm_backward_input_kernel(const Tensor& grad_output, const Tensor& input, const Tensor& mean,
                                        const Tensor& invstd, const Tensor& weight, const Tensor& sum_dy,
                                        const Tensor& sum_dy_xmu, int64_t count, const Tensor& relu_output);

}  // namespace ember::cuda
