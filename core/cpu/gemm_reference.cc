// The reference GEMM: a plain i-p-j loop nest over packed operands, parallel over rows.
#include <vector>

#include "core/cpu/gemm.h"
#include "core/cpu/thread_pool.h"

namespace ember::cpu {

template <typename T>
void gemm_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                    const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  // B as a contiguous [k, n] block so the inner loop runs along memory.
  std::vector<T> packed_b(static_cast<size_t>(k * n));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) packed_b[p * n + j] = trans_b ? b[j * ldb + p] : b[p * ldb + j];
  parallel_for(0, m, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n * k)), [&](int64_t lo, int64_t hi) {
    std::vector<T> row(static_cast<size_t>(n));
    for (int64_t i = lo; i < hi; ++i) {
      std::fill(row.begin(), row.end(), T(0));
      for (int64_t p = 0; p < k; ++p) {
        T aip = trans_a ? a[p * lda + i] : a[i * lda + p];
        const T* bp = packed_b.data() + p * n;
        for (int64_t j = 0; j < n; ++j) row[j] += aip * bp[j];
      }
      T* ci = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) ci[j] = alpha * row[j] + (beta == T(0) ? T(0) : beta * ci[j]);
    }
  });
}

template void gemm_reference<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                                    int64_t, float, float*, int64_t);
template void gemm_reference<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                     const double*, int64_t, double, double*, int64_t);

}  // namespace ember::cpu
