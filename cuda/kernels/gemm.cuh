// Ember's own GEMM: C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] (core/backend.h's GemmArgs),
// any transposes and leading dimensions, batched with strides; float32/float64, and
// bfloat16/float16 accumulated in float32. m, n and batch are positive (cuda::gemm returns early).
// On real GPUs matmul normally runs on cuBLAS (cuda/blas.h); this kernel serves emulated devices
// and the fallback.
#pragma once

#include "core/backend.h"

namespace ember::cuda {

void ember_gemm(const GemmArgs& args);
// The same with C in float32 and A and B bfloat16 or float16 (args.dtype): for callers whose sums
// go on after the product (cuda/conv.cc), so that they round to 16 bits once, at their end.
void ember_gemm_float32_output(const GemmArgs& args);

}  // namespace ember::cuda
