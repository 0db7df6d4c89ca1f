// gather and scatter_add along one dim on CUDA devices (PyTorch's semantics, as the CPU kernels):
// the index tensor's shape drives the loop, and every operand keeps its own strides.
#pragma once

#include "core/backend.h"

namespace ember::cuda {

// out[i][j] = input[i][index[i][j]] along dim.
void gather_kernel(const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index);
// out[i][index[i][j]] += src[i][j] along dim; duplicate indices add up (atomically).
void scatter_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace ember::cuda
