// CPU GEMM entry points, row-major: C = alpha * op(A) * op(B) + beta * C, op = transpose or not.
// sgemm is the fast path used by the backend; gemm_reference is the simple loop nest the fast
// path is tested against (and the path for float64).
#pragma once

#include <cstdint>

#include "core/backend.h"

namespace ember::cpu {

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// A bf16 GEMM on oneDNN's matmul (gemm_bf16.cc); false, having done nothing, where the CPU lacks
// native bf16 or oneDNN has no fast kernel for the shape (the caller then widens to float32).
bool gemm_bf16_onednn(const GemmArgs& g);

template <typename T>
void gemm_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                    const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace ember::cpu
