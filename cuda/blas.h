// Matrix products on CUDA devices: cuBLAS on real GPUs, Ember's own tiled kernel on emulated
// devices and wherever it is asked for. PyTorch's defaults: float32 products in full precision;
// TF32 tensor cores (10-bit mantissa inputs, ~3x faster on Ampere and Hopper) only when allowed.
#pragma once

#include "cuda/kernels/entries.h"

namespace ember::cuda {

// torch.backends.cuda.matmul.allow_tf32: off by default.
void set_matmul_allow_tf32(bool allow);
bool matmul_allow_tf32();

// Which kernel computes matmul on a real GPU: cuBLAS (Auto) or Ember's own (Ember), for the
// benchmark's comparison and as a fallback. Emulated devices always run Ember's.
enum class GemmKernel { Auto, Ember };
void set_gemm_kernel(GemmKernel kernel);
GemmKernel gemm_kernel_choice();

// The compute table's gemm entry, gemm_kernel, is declared in cuda/kernels/entries.h.

// gemm_kernel with A and B bfloat16 or float16 (args.dtype) and C float32: for sums that go on
// after the product (cuda/conv.cc's backward passes), which then round to 16 bits once.
void gemm_float32_output(const GemmArgs& args);

}  // namespace ember::cuda
