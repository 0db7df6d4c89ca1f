// Core op benchmark: matmul GFLOP/s on square and im2col-shaped GEMMs next to OpenBLAS's and
// oneDNN's sgemm, and elementwise add/mul and sum GB/s next to memcpy, all in one run.
//
//   bazel run --config=bench //tools/bench:ops [-- rounds]
//
// GEMM: C[M,N] = op(A) op(B), GFLOP/s = 2*M*N*K / t. The im2col rows are the GEMMs of a CIFAR
// ResNet-20 conv layer at batch 128 (O = out channels, CKK = in channels * 3 * 3, P = N*OH*OW):
// forward W[O,CKK] x cols[CKK,P], backward-data W^T x dY, backward-weight dY x cols^T, the last
// two from transposed views. Ember's side is `matmul` as a user calls it (it allocates C); the
// yardsticks write into a preallocated C. On AVX-512 CPUs OpenBLAS runs with
// OPENBLAS_CORETYPE=SkylakeX (tools/bench/openblas_core.h).
//
// Bandwidth: bytes counted once per operand read or written (add: 12 B/element, sum: 4 B/element,
// memcpy: 8 B/element), on 128 MB operands (4x this CPU's 32 MB L3, so all of it is DRAM traffic:
// with 16 MB operands memcpy ran from L3 while a + b, touching 48 MB, could not). Each side is timed
// in blocks of calls that alternate for `rounds` rounds; each reports its median call.
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"
#include "tools/bench/openblas_core.h"
#include "tools/bench/timing.h"

namespace {

using namespace ember;

constexpr int kThreads = 2;

double seconds_of(const std::function<void()>& call) {
  const double start = bench::now_seconds();
  call();
  return bench::now_seconds() - start;
}

// Median seconds per call of each side; sides run in alternating blocks so that a burst of load
// on the machine hits all of them alike. Between blocks everyone's threads are left to go to sleep
// (OpenBLAS's and OpenMP's workers spin for a while after a call, and spinning workers of one
// library took the cores from the next block's library: OpenBLAS measured 96 GFLOP/s on 512^3
// right after oneDNN instead of 200), and each block's first call is not counted.
std::vector<double> race(const std::vector<std::function<void()>>& sides, int rounds, int calls_per_block) {
  std::vector<std::vector<double>> times(sides.size());
  for (int round = 0; round < rounds; ++round)
    for (size_t s = 0; s < sides.size(); ++s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      sides[s]();
      for (int i = 0; i < calls_per_block; ++i) times[s].push_back(seconds_of(sides[s]));
    }
  std::vector<double> medians;
  for (auto& t : times) medians.push_back(bench::median(t));
  return medians;
}

struct Gemm {
  std::string name;
  int64_t m, n, k;
  bool trans_a, trans_b;
};

std::vector<Gemm> gemm_shapes() {
  std::vector<Gemm> shapes;
  for (int64_t s : {256, 512, 1024, 2048}) shapes.push_back({"square " + std::to_string(s), s, s, s, false, false});
  struct Layer {
    int64_t o, ckk, p;
  };
  for (Layer l : {Layer{16, 144, 131072}, Layer{32, 288, 32768}, Layer{64, 576, 8192}}) {
    const std::string dims = std::to_string(l.o) + "x" + std::to_string(l.ckk) + "x" + std::to_string(l.p);
    shapes.push_back({"conv fwd " + dims, l.o, l.p, l.ckk, false, false});
    shapes.push_back({"conv bwd_data " + dims, l.ckk, l.p, l.o, true, false});
    shapes.push_back({"conv bwd_weight " + dims, l.o, l.ckk, l.p, false, true});
  }
  return shapes;
}

// A row-major [rows, cols] matrix stored as op requires: transposed operands are views of a
// [cols, rows] tensor, as autograd hands them to matmul.
Tensor operand(int64_t rows, int64_t cols, bool transposed) {
  return transposed ? randn({cols, rows}).t() : randn({rows, cols});
}

double run_gemms(int rounds) {
  std::printf("\nGEMM, fp32, %d threads: GFLOP/s (median call)\n", kThreads);
  std::printf("%-34s %9s %9s %9s %7s\n", "shape (O x CKK x P for conv)", "Ember", "OpenBLAS", "oneDNN", "ratio");
  double worst = 1e9;
  for (const Gemm& g : gemm_shapes()) {
    Tensor a = operand(g.m, g.k, g.trans_a), b = operand(g.k, g.n, g.trans_b);
    Tensor a_dense = g.trans_a ? a.t().contiguous() : a, b_dense = g.trans_b ? b.t().contiguous() : b;
    std::vector<float> c(static_cast<size_t>(g.m * g.n));
    const float* pa = a_dense.data_ptr<float>();
    const float* pb = b_dense.data_ptr<float>();
    const int64_t lda = g.trans_a ? g.m : g.k, ldb = g.trans_b ? g.k : g.n;
    const char ta = g.trans_a ? 'T' : 'N', tb = g.trans_b ? 'T' : 'N';
    const double flops = 2.0 * g.m * g.n * g.k;
    const int calls = std::clamp(static_cast<int>(2e9 / flops), 1, 20);
    std::vector<double> t =
        race({[&] { Tensor out = matmul(a, b); },
              [&] {
                cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
                            static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), 1.0f, pa,
                            static_cast<int>(lda), pb, static_cast<int>(ldb), 0.0f, c.data(), static_cast<int>(g.n));
              },
              [&] { dnnl_sgemm(ta, tb, g.m, g.n, g.k, 1.0f, pa, lda, pb, ldb, 0.0f, c.data(), g.n); }},
             rounds, calls);
    const double ember = flops / t[0] * 1e-9, blas = flops / t[1] * 1e-9, onednn = flops / t[2] * 1e-9;
    const double ratio = ember / std::max(blas, onednn);
    worst = std::min(worst, ratio);
    std::printf("%-34s %9.1f %9.1f %9.1f %7.2f\n", g.name.c_str(), ember, blas, onednn, ratio);
  }
  return worst;
}

double run_bandwidth(int rounds) {
  constexpr int64_t kElements = 32 << 20;  // 128 MB per float32 operand
  constexpr double kBytes = 4.0 * kElements;
  std::printf("\nElementwise and reduction, fp32, %lld elements (128 MB operands), %d threads: GB/s (median call)\n",
              static_cast<long long>(kElements), kThreads);
  Tensor a = randn({kElements}), b = randn({kElements});
  Tensor out = empty({kElements});
  std::vector<char> src(static_cast<size_t>(kBytes)), dst(static_cast<size_t>(kBytes));
  std::memset(src.data(), 1, src.size());
  // memcpy on both threads, each its half, as Ember's ops use both.
  auto memcpy_two_threads = [&] {
    cpu::parallel_for(0, 2, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t half = lo; half < hi; ++half) {
        const size_t bytes = src.size() / 2;
        std::memcpy(dst.data() + half * bytes, src.data() + half * bytes, bytes);
      }
    });
  };
  struct Op {
    const char* name;
    double bytes;
    std::function<void()> call;
  };
  const Op ops[] = {
      {"add  c = a + b", 3 * kBytes, [&] { Tensor c = a + b; }},
      {"mul  c = a * b", 3 * kBytes, [&] { Tensor c = a * b; }},
      {"add_ a += b", 3 * kBytes, [&] { out.add_(b); }},
      {"sum  a.sum()", kBytes, [&] { Tensor s = a.sum(); }},
  };
  std::printf("%-18s %9s %9s %7s\n", "op", "Ember", "memcpy", "ratio");
  double worst = 1e9;
  for (const Op& op : ops) {
    std::vector<double> t = race({op.call, memcpy_two_threads}, rounds, 10);
    const double ember = op.bytes / t[0] * 1e-9, copy = 2 * kBytes / t[1] * 1e-9;
    worst = std::min(worst, ember / copy);
    std::printf("%-18s %9.1f %9.1f %7.2f\n", op.name, ember, copy, ember / copy);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  if (!bench::pin_openblas_core(argv)) return 1;
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  cpu::set_num_threads(kThreads);
  omp_set_num_threads(kThreads);
  openblas_set_num_threads(kThreads);
  std::printf("ops benchmark: %d threads, OpenBLAS core %s, %d rounds\n", kThreads, openblas_get_corename(), rounds);
  const double gemm = run_gemms(rounds);
  const double elementwise = run_bandwidth(rounds);
  std::printf("\nbench ops: gemm_vs_best_min=%.2f elementwise_vs_memcpy_min=%.2f\n", gemm, elementwise);
  return 0;
}
