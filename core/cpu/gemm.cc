// The backend's gemm entry: batching and dtype handling around sgemm / the reference loops.
// float32 runs on oneDNN's sgemm (chosen by //tools/bench:ops over Eigen: it keeps its speed on
// the skinny im2col shapes of small convnets on AVX-512 CPUs), with long reductions split over K
// by Ember itself, or on Ember's own AVX2 kernel for skinny shapes (skinny_sgemm.h) where timing
// the two on the shape's first call says so (core/kernel_select.h; under the heuristic, only on
// CPUs without AVX-512, where oneDNN's AVX2 kernels measured behind); bf16 runs on oneDNN's bf16
// matmul where the CPU has native bf16 (gemm_bf16.cc), and 16-bit floats are otherwise widened to
// float32, multiplied, and rounded back once.
#include "core/cpu/gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/cpu/avx2_tile.h"
#include "core/cpu/dnnl/runtime.h"
#include "core/cpu/kernels.h"
#include "core/cpu/skinny_sgemm.h"
#include "core/cpu/isa.h"
#include "core/cpu/thread_pool.h"
#include "core/error.h"
#include "core/kernel_select.h"

namespace ember::cpu {

namespace {

void checked_sgemm(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  isa();  // applies EMBER_CPU_ISA to oneDNN before its first use
  const onednn::SignalsHeld held;
  const dnnl_status_t status = dnnl_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  EMBER_CHECK(status == dnnl_success, "matmul: oneDNN sgemm failed (status ", static_cast<int>(status), ") for m=", m,
              " n=", n, " k=", k);
}

// A long reduction into a small C, e.g. a convolution's weight gradient (O x C*KH*KW, summed over
// N*OH*OW): oneDNN's sgemm splits only M and N between threads, and runs such shapes far below its
// peak. Here each thread reduces its share of K into its own partial C, single-threaded, and the
// partials are added. Each partial is computed with the longer of M and N as its rows (as
// C^T = op(B)^T op(A)^T when N > M), which oneDNN's kernels run several times faster on these
// shapes (docs/BENCHMARKS.md, "Notes moved from code comments").
bool wants_split_k(int64_t m, int64_t n, int64_t k, int threads) {
  return threads > 1 && !in_parallel_region() && k >= 4 * std::max(m, n) && m * n <= (int64_t{1} << 20);
}

void sgemm_split_k(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, int threads) {
  const bool swap = n > m;
  const int64_t block = m * n;
  std::vector<float> partial(static_cast<size_t>(threads * block));
  parallel_for(0, threads, 1, [&](int64_t lo, int64_t hi) {
    onednn::size_openmp_team();  // inside a task: one thread
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t k0 = k * t / threads, k1 = k * (t + 1) / threads;
      if (k1 == k0) {
        std::fill_n(partial.data() + t * block, block, 0.0f);
        continue;
      }
      const float* a_part = trans_a ? a + k0 * lda : a + k0;  // stored [K, M] or [M, K]
      const float* b_part = trans_b ? b + k0 : b + k0 * ldb;  // stored [N, K] or [K, N]
      float* out = partial.data() + t * block;
      if (swap) {
        checked_sgemm(trans_b ? 'N' : 'T', trans_a ? 'N' : 'T', n, m, k1 - k0, 1.0f, b_part, ldb, a_part, lda, 0.0f,
                      out, m);
      } else {
        checked_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k1 - k0, 1.0f, a_part, lda, b_part, ldb, 0.0f,
                      out, n);
      }
    }
  });
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = swap ? j * m + i : i * n + j;
      float sum = 0.0f;
      for (int t = 0; t < threads; ++t) sum += partial[static_cast<size_t>(t * block + at)];
      c[i * ldc + j] = alpha * sum + (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]);
    }
}

// oneDNN's sgemm, or Ember's split over K for long reductions.
void library_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int threads = num_threads();
  if (wants_split_k(m, n, k, threads)) {
    sgemm_split_k(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads);
    return;
  }
  onednn::size_openmp_team();
  checked_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Whether Ember's skinny kernel (skinny_sgemm.h) takes this product rather than oneDNN's sgemm.
// Where it can, and the product is large enough for the choice to matter, the two are timed on
// the first call of the shape (core/kernel_select.h) into a copy of C; otherwise, and under
// EMBER_KERNEL_SELECT=heuristic, skinny_sgemm_preferred's rule measured on the AVX2 VM decides.
bool skinny_chosen(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const bool heuristic = skinny_sgemm_preferred(trans_a, trans_b, m, n, k, alpha, beta);
  const bool applies = avx2::supported() && !trans_b && alpha == 1.0f && (beta == 0.0f || beta == 1.0f) && m <= 288 &&
                       m * n * k >= (int64_t{1} << 22);
  if (!applies || !kernel_select::may_differ_from_heuristic()) return heuristic;
  const std::string key = "sgemm " + std::string(trans_a ? "T" : "N") + "N m=" + std::to_string(m) +
                          " n=" + std::to_string(n) + " k=" + std::to_string(k) + (beta == 1.0f ? " accumulate" : "") +
                          " threads=" + std::to_string(num_threads());
  static kernel_select::Memo<bool> chosen;
  if (auto found = chosen.find(key)) return *found;
  std::vector<float> scratch(static_cast<size_t>(m * n));
  const int index = kernel_select::choose(key, {"onednn-sgemm", "ember-skinny-avx2"}, heuristic ? 1 : 0, [&](int i) {
    for (int64_t r = 0; r < m; ++r) std::copy_n(c + r * ldc, n, scratch.data() + r * n);
    if (i == 1)
      skinny_sgemm(trans_a, m, n, k, a, lda, b, ldb, beta == 1.0f, scratch.data(), n);
    else
      library_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, scratch.data(), n);
  });
  return chosen.store(key, index == 1);
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta * C; oneDNN returns early without touching C
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  if (skinny_chosen(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) {
    skinny_sgemm(trans_a, m, n, k, a, lda, b, ldb, /*accumulate=*/beta == 1.0f, c, ldc);
    return;
  }
  library_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {

template <typename T>
std::vector<float> widen(const T* data, bool trans, int64_t rows, int64_t cols, int64_t ld) {
  // Stored matrix is [rows, cols] when !trans, else [cols, rows]; keep that layout, densely.
  int64_t r = trans ? cols : rows, c = trans ? rows : cols;
  std::vector<float> out(static_cast<size_t>(r * c));
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) out[i * c + j] = static_cast<float>(data[i * ld + j]);
  return out;
}

template <typename T>
void gemm_16bit(const GemmArgs& g) {
  for (int64_t batch = 0; batch < g.batch; ++batch) {
    const T* a = static_cast<const T*>(g.a) + batch * g.stride_a;
    const T* b = static_cast<const T*>(g.b) + batch * g.stride_b;
    T* c = static_cast<T*>(g.c) + batch * g.stride_c;
    std::vector<float> wa = widen(a, g.trans_a, g.m, g.k, g.lda);
    std::vector<float> wb = widen(b, g.trans_b, g.k, g.n, g.ldb);
    std::vector<float> wc(static_cast<size_t>(g.m * g.n));
    if (g.beta != 0.0)
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j) wc[i * g.n + j] = static_cast<float>(c[i * g.ldc + j]);
    sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, static_cast<float>(g.alpha), wa.data(), g.trans_a ? g.m : g.k, wb.data(),
          g.trans_b ? g.k : g.n, static_cast<float>(g.beta), wc.data(), g.n);
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) c[i * g.ldc + j] = T(wc[i * g.n + j]);
  }
}

}  // namespace

void gemm_kernel(const GemmArgs& g) {
  switch (g.dtype) {
    case kFloat32:
      for (int64_t batch = 0; batch < g.batch; ++batch)
        sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, static_cast<float>(g.alpha),
              static_cast<const float*>(g.a) + batch * g.stride_a, g.lda,
              static_cast<const float*>(g.b) + batch * g.stride_b, g.ldb, static_cast<float>(g.beta),
              static_cast<float*>(g.c) + batch * g.stride_c, g.ldc);
      return;
    case kFloat64:
      for (int64_t batch = 0; batch < g.batch; ++batch)
        gemm_reference<double>(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha,
                               static_cast<const double*>(g.a) + batch * g.stride_a, g.lda,
                               static_cast<const double*>(g.b) + batch * g.stride_b, g.ldb, g.beta,
                               static_cast<double*>(g.c) + batch * g.stride_c, g.ldc);
      return;
    case kBFloat16:
      if (gemm_bf16_onednn(g)) return;
      return gemm_16bit<BFloat16>(g);
    case kFloat16:
      return gemm_16bit<Half>(g);
    default:
      detail::unsupported_dtype("gemm", g.dtype);
  }
}

}  // namespace ember::cpu
