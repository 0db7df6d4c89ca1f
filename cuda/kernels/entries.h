// The CUDA backend's compute-table entries, as `ember::cuda::name_kernel`
// (core/kernel_entries.inc): cuda/kernels/*.cu, cuda/blas.cc and cuda/conv.cc define them,
// cuda/backend.cc registers them.
#pragma once

#include "core/backend.h"

namespace ember::cuda {

#define EMBER_KERNEL(name, result, params) result name##_kernel params;
#include "core/kernel_entries.inc"
#undef EMBER_KERNEL

}  // namespace ember::cuda
