// Ember's own GEMM: C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] (core/backend.h's GemmArgs),
// any transposes and leading dimensions, batched with strides; float32/float64, and
// bfloat16/float16 accumulated in float32. m, n and batch are positive (cuda::gemm returns early). On real GPUs matmul normally runs on cuBLAS
// (cuda/blas.h); this kernel serves emulated devices and the fallback.
#pragma once

#include "core/backend.h"

namespace ember::cuda {

void ember_gemm(const GemmArgs& args);

}  // namespace ember::cuda
