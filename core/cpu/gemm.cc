// The backend's gemm entry: batching and dtype handling around sgemm / the reference loops.
// float32 runs on oneDNN's sgemm (chosen by //tools/bench:ops over Eigen: it keeps its speed on
// the skinny im2col shapes of small convnets); 16-bit floats are widened to float32, multiplied,
// and rounded back once.
#include "core/cpu/gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <vector>

#include "core/cpu/dnnl/runtime.h"
#include "core/cpu/kernels.h"
#include "core/cpu/thread_pool.h"
#include "core/error.h"

namespace ember::cpu {

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta * C; oneDNN returns early without touching C
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  onednn::size_openmp_team();
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                          beta, c, ldc);
  EMBER_CHECK(status == dnnl_success, "matmul: oneDNN sgemm failed (status ", static_cast<int>(status), ") for m=", m,
              " n=", n, " k=", k);
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
    sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, static_cast<float>(g.alpha), wa.data(), g.trans_a ? g.m : g.k,
          wb.data(), g.trans_b ? g.k : g.n, static_cast<float>(g.beta), wc.data(), g.n);
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
    case kBFloat16: return gemm_16bit<BFloat16>(g);
    case kFloat16: return gemm_16bit<Half>(g);
    default: detail::unsupported_dtype("gemm", g.dtype);
  }
}

}  // namespace ember::cpu
