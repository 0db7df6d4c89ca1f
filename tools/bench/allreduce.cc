// All-reduce latency and bus bandwidth through Ember's ProcessGroup next to raw MPI_Allreduce on
// the same ranks, in the same run, for 4 KB ... 100 MB. busbw = algbw * 2(n-1)/n (nccl-tests'
// definition), algbw = bytes / time. Ember and MPI trials alternate, so load hits both alike, and
// reduce the same buffer, so memory placement does too.
// Run: mpirun -np 2 bazel-out/k8-opt/bin/tools/bench/allreduce (after bazel build --config=bench)
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "comm/init.h"
#include "core/ember_core.h"
#include "tools/bench/timing.h"

using namespace ember;

namespace {

// Mean time of `reps` back-to-back calls, the slowest rank's; ranks start together.
template <typename F>
double time_trial(F op, int reps) {
  MPI_Barrier(MPI_COMM_WORLD);
  double start = bench::now_seconds();
  for (int r = 0; r < reps; ++r) op();
  double elapsed = (bench::now_seconds() - start) / reps;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return elapsed;
}

}  // namespace

int main() {
  auto world = comm::init();
  const int n = world->size(), rank = world->rank();
  const double factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  if (rank == 0) {
    std::printf("all_reduce (sum, float32): Ember ProcessGroup vs raw MPI_Allreduce, %d ranks\n", n);
    std::printf("%10s %12s %12s %12s %12s %8s\n", "bytes", "ember_us", "mpi_us", "ember_busbw", "mpi_busbw", "ratio");
    std::printf("%10s %12s %12s %12s %12s %8s\n", "", "", "", "GB/s", "GB/s", "");
  }
  double worst_large = 1e9;
  std::vector<int64_t> sizes;
  for (int64_t bytes = 4096; bytes < 100'000'000; bytes *= 4) sizes.push_back(bytes);
  sizes.push_back(100'000'000);
  for (int64_t bytes : sizes) {
    const int64_t count = bytes / 4;
    // Both sides reduce the same buffer. With one buffer each, whichever was allocated later ran
    // 5-10% faster at 16-100 MB (a standalone MPI program comparing plain buffers showed it both
    // ways round), which measured memory placement rather than the ProcessGroup. Zeros, so that
    // repeated sums stay finite.
    Tensor buffer = zeros({count});
    float* raw = buffer.data_ptr<float>();
    // Enough repetitions for ~0.1 s per trial, at least 3; many short alternating trials, because
    // this machine's shared-memory bandwidth drifts by 2x within seconds.
    int reps = static_cast<int>(std::clamp<int64_t>(100'000'000 / std::max<int64_t>(bytes, 50'000), 3, 2000));
    const int trials = 15;
    auto ember_op = [&] { world->all_reduce(buffer, comm::ReduceOp::Sum)->wait(); };
    auto mpi_op = [&] { MPI_Allreduce(MPI_IN_PLACE, raw, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
    ember_op();
    mpi_op();
    // Each trial times both sides back to back, in alternating order. Times are the medians over
    // trials; the ratio is the median of the trials' own ratios, so that bandwidth drifting between
    // trials (2x within seconds here) cancels instead of entering a ratio of two medians.
    std::vector<double> ember_trials, mpi_trials, ratios;
    for (int t = 0; t < trials; ++t) {
      if (t % 2 == 0) mpi_trials.push_back(time_trial(mpi_op, reps));
      ember_trials.push_back(time_trial(ember_op, reps));
      if (t % 2 == 1) mpi_trials.push_back(time_trial(mpi_op, reps));
      ratios.push_back(mpi_trials.back() / ember_trials.back());
    }
    double t_mpi = bench::median(mpi_trials), t_ember = bench::median(ember_trials);
    double bus_ember = bytes / t_ember * factor / 1e9, bus_mpi = bytes / t_mpi * factor / 1e9;
    double ratio = bench::median(ratios);
    if (bytes >= 1000 * 1000) worst_large = std::min(worst_large, ratio);
    if (rank == 0)
      std::printf("%10lld %12.1f %12.1f %12.3f %12.3f %8.3f\n", static_cast<long long>(bytes), t_ember * 1e6,
                  t_mpi * 1e6, bus_ember, bus_mpi, ratio);
  }
  if (rank == 0) std::printf("bench allreduce: ranks=%d busbw_vs_mpi_min_1mb=%.3f\n", n, worst_large);
  return 0;
}
