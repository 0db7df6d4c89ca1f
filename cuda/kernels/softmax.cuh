// Softmax and log-softmax along one dim on a CUDA device, and their backward from the forward
// output: the kernel-table entries (core/backend.h).
#pragma once

#include "core/backend.h"

namespace ember::cuda {

Tensor softmax_kernel(const Tensor& input, int64_t dim, bool log);
Tensor softmax_backward_kernel(const Tensor& grad_output, const Tensor& output, int64_t dim, bool log);

}  // namespace ember::cuda
