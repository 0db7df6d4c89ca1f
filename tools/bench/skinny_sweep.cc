// Where Ember's skinny GEMM (core/cpu/skinny_sgemm.h) should replace oneDNN's sgemm: both on a grid
// of shapes (m 8-288 rows of C, k 8-576, n 8K-128K columns, A plain and transposed, B plain;
// 2 threads), with the column skinny_sgemm_preferred() gives each shape. The summary line holds
// the slowest ratio among the shapes the predicate takes and the fastest among those it leaves to
// oneDNN: the predicate is right where the first is above 1 and the second not far above it.
//
//   bazel run --config=bench //tools/bench:skinny_sweep [-- calls]
//
// The kernel itself runs on any CPU with AVX2; the predicate is true only without AVX-512, so on
// an AVX-512 CPU the "taken" column is empty and the table compares the kernel for information.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/cpu/avx2_tile.h"
#include "core/cpu/dnnl/runtime.h"
#include "core/cpu/skinny_sgemm.h"
#include "core/cpu/thread_pool.h"
#include "tools/bench/timing.h"

namespace {

using namespace ember::cpu;

// Median seconds of `calls` calls after one untimed call.
template <typename F>
double median_call(const F& call, int calls) {
  call();
  std::vector<double> t;
  for (int i = 0; i < calls; ++i) {
    const double start = ember::bench::now_seconds();
    call();
    t.push_back(ember::bench::now_seconds() - start);
  }
  return ember::bench::median(t);
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  if (!avx2::supported()) {
    std::printf("skinny_sweep: this CPU has no AVX2; the kernel cannot run\n");
    return 1;
  }
  set_num_threads(2);
  std::printf("skinny GEMM sweep: C[m, n] = op(A)[m, k] B[k, n], fp32, 2 threads, median of %d calls\n", calls);
  std::printf("%5s %5s %7s %3s %8s %8s %6s %6s\n", "m", "k", "n", "tA", "Ember", "oneDNN", "ratio", "taken");
  double taken_min = 1e9, skipped_max = 0;
  for (bool trans_a : {false, true})
    for (int64_t m : {8, 16, 32, 64, 144, 288})
      for (int64_t k : {8, 16, 32, 64, 144, 288, 576})
        for (int64_t n : {8192, 32768, 131072}) {
          if (k * n > 20000000) continue;  // B under 80 MB
          std::vector<float> a(static_cast<size_t>(m * k), 0.5f), b(static_cast<size_t>(k * n), 0.25f);
          std::vector<float> c(static_cast<size_t>(m * n));
          const int64_t lda = trans_a ? m : k;
          const double ember = median_call(
              [&] { skinny_sgemm(trans_a, m, n, k, a.data(), lda, b.data(), n, false, c.data(), n); }, calls);
          const double onednn = median_call(
              [&] {
                onednn::size_openmp_team();
                dnnl_sgemm(trans_a ? 'T' : 'N', 'N', m, n, k, 1.0f, a.data(), lda, b.data(), n, 0.0f, c.data(), n);
              },
              calls);
          const bool taken = skinny_sgemm_preferred(trans_a, false, m, n, k, 1.0f, 0.0f);
          const double ratio = onednn / ember, gflop = 2e-9 * static_cast<double>(m * n * k);
          if (taken)
            taken_min = std::min(taken_min, ratio);
          else
            skipped_max = std::max(skipped_max, ratio);
          std::printf("%5ld %5ld %7ld %3d %8.1f %8.1f %6.2f %6s\n", static_cast<long>(m), static_cast<long>(k),
                      static_cast<long>(n), trans_a ? 1 : 0, gflop / ember, gflop / onednn, ratio, taken ? "yes" : "");
        }
  if (taken_min > 1e8) taken_min = 0;
  std::printf("\nbench skinny_sweep: taken_min=%.2f skipped_max=%.2f\n", taken_min, skipped_max);
  return 0;
}
