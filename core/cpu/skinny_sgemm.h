// Ember's own float32 GEMM for products that oneDNN's sgemm runs slowly on CPUs without AVX-512:
// few rows or a short reduction against very many columns, as the im2col GEMMs of small convnets
// (C[16 x 131072] = W[16 x 144] * cols[144 x 131072]) and their backward-data products are. On an
// AVX2-only CPU oneDNN ran those at well under half of OpenBLAS's rate (tools/bench/ops;
// docs/BENCHMARKS.md).
#pragma once

#include <cstdint>

namespace ember::cpu {

// Whether sgemm should take this kernel for C = alpha * op(A) * op(B) + beta * C (row-major): a
// CPU without AVX-512, B not transposed, alpha 1, beta 0 or 1, and a shape it measured faster on.
bool skinny_sgemm_preferred(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, float beta);

// C = op(A) * B (+ C when `accumulate`), row-major; op(A) is [M, K], stored [K, M] when `trans_a`;
// B is [K, N]. Requires avx2::supported(). `streaming` writes C with streaming stores, around the
// cache (tests force it; by default, C at least the last-level cache's size in one pass over K
// decides). It is taken only where C's vectors are 32-byte aligned and C is not accumulated into.
void skinny_sgemm(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, bool accumulate, float* c, int64_t ldc);
void skinny_sgemm(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, bool accumulate, float* c, int64_t ldc, bool streaming);

}  // namespace ember::cpu
