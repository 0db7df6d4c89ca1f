// Training-step benchmark: images/s of a full step (forward, cross-entropy, backward, SGD with
// momentum) of ResNet-20 and ResNet-18 (CIFAR stem) on a synthetic CIFAR batch, in float32 and
// under bf16 autocast (AutocastGuard(kCPU, kBFloat16) around forward and loss, as PyTorch's
// torch.autocast("cpu", torch.bfloat16) recipe has it; the parameters stay float32), and the
// float32 FLOP rate next to OpenBLAS's sgemm rate measured in the same run.
//
//   bazel run --config=bench //tools/bench:train_step [-- steps]
//   tools/bench/train_step_vs_torch      (this program next to PyTorch CPU, as a ratio)
//
// FLOPs of a step = 3 x the forward's (backward-data and backward-weight cost what the forward
// does), forward = sum over convolutions of 2*N*O*OH*OW*(C/groups)*KH*KW plus 2*N*in*out per
// linear layer, counted exactly by routing one forward through a counting copy of the CPU kernel
// table. Batch 128, 2 threads, median of at least 10 steps after 3 warm-up steps (the first of
// which makes the kernel choices: core/kernel_select.h), with the spread of the steps. bf16 is
// fast only where the CPU has bf16 dot products (AVX512_BF16 or AMX, `native bf16` in the header);
// elsewhere it runs, correctly, on float32 arithmetic. Per model and precision, each convolution
// pass's chosen algorithm and its share of the step follow, so that a slow step on a new CPU says
// where its time went.
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/functional.h"
#include "core/autocast.h"
#include "core/cpu/isa.h"
#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"
#include "core/kernel_select.h"
#include "tools/bench/census.h"
#include "tools/bench/openblas_core.h"
#include "tools/bench/timing.h"
#include "models/zoo.h"
#include "nn/optim/sgd.h"

namespace {

using namespace ember;

constexpr int kThreads = 2;
constexpr int64_t kBatch = 128;

struct Result {
  double images_per_second, gflops;
  double slowest_ips, fastest_ips;  // the spread of the timed steps
  double first_step_seconds;        // includes the kernel trials
  std::vector<kernel_select::Usage> passes;
  double timed_seconds;
};

Result time_model(const std::string& name, int steps, bool bf16) {
  manual_seed(0);
  auto model = models::make_model(name, 3, 32, 10);
  model->train();
  Tensor images = randn({kBatch, 3, 32, 32}), labels = randint(0, 10, {kBatch});
  const double step_flops = 3.0 * kBatch * bench::take_census(*model, {3, 32, 32}).forward_flops_per_image;
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4));
  std::vector<double> times;
  double first = 0;
  for (int step = 0; step < steps + 3; ++step) {
    if (step == 3) {
      kernel_select::clear_usage();
      kernel_select::set_profiling(true);
    }
    const double start = bench::now_seconds();
    optimizer.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(kCPU, kBFloat16, bf16);
      loss = cross_entropy(model->forward(images), labels);
    }
    loss.backward();
    optimizer.step();
    const double seconds = bench::now_seconds() - start;
    if (step == 0) first = seconds;
    if (step >= 3) times.push_back(seconds);
  }
  kernel_select::set_profiling(false);
  const double seconds = bench::median(times);
  double total = 0;
  for (double t : times) total += t;
  return {kBatch / seconds,
          step_flops / seconds * 1e-9,
          kBatch / *std::max_element(times.begin(), times.end()),
          kBatch / *std::min_element(times.begin(), times.end()),
          first,
          kernel_select::usage(),
          total};
}

// Where a model's step went: each convolution pass (and chosen GEMM) by time, with the algorithm
// chosen for it, how, and what the others measured in their trials.
void print_passes(const std::string& name, const Result& r, int steps) {
  std::printf("%s: per pass, by share of the step (%s selection; first step %.2f s, trials included)\n", name.c_str(),
              kernel_select::mode_name(kernel_select::mode()), r.first_step_seconds);
  std::printf("  %6s %8s  %-24s %-15s %s\n", "share", "ms/step", "algorithm", "chosen by", "pass");
  double shown = 0;
  for (const auto& u : r.passes) {
    const double share = u.seconds / r.timed_seconds;
    shown += share;
    const auto& d = u.decision;
    const std::string algorithm = d.candidates.empty() ? "?" : d.candidates[d.chosen];
    std::string trials;  // each other candidate's trial time relative to the winner's
    for (size_t i = 0; i < d.seconds.size(); ++i) {
      if (static_cast<int>(i) == d.chosen) continue;
      char relative[32] = "failed";
      if (d.seconds[i] >= 0) std::snprintf(relative, sizeof(relative), "%.2fx", d.seconds[i] / d.seconds[d.chosen]);
      trials += (trials.empty() ? " [" : ", ") + d.candidates[i] + " " + relative;
    }
    if (!trials.empty()) trials += "]";
    std::printf("  %5.1f%% %8.2f  %-24s %-15s %s%s\n", 100 * share, 1e3 * u.seconds / steps, algorithm.c_str(),
                d.how.c_str(), d.key.c_str(), trials.c_str());
  }
  std::printf("  %5.1f%%           everything else (batch norm, ReLU, pooling, loss, optimizer, autograd)\n",
              100 * (1 - shown));
}

// OpenBLAS sgemm on a 2048 cube, best of 5: the machine's practical dense fp32 rate.
double openblas_gflops() {
  const int n = 2048;
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a), c(a.size());
  double best = 1e9;
  for (int i = 0; i < 6; ++i) {
    const double start = bench::now_seconds();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    if (i > 0) best = std::min(best, bench::now_seconds() - start);
  }
  return 2.0 * n * n * n / best * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  if (!bench::pin_openblas_core(argv)) return 1;
  const int steps = std::max(10, argc > 1 ? std::atoi(argv[1]) : 10);
  cpu::set_num_threads(kThreads);
  openblas_set_num_threads(kThreads);
  const double blas = openblas_gflops();
  std::printf(
      "train_step benchmark: batch %lld, 3x32x32, fp32 and bf16 autocast, %d threads, SGD momentum 0.9, median of "
      "%d steps, kernel selection: %s, ISA: %s, native bf16: %s\n",
      static_cast<long long>(kBatch), kThreads, steps, kernel_select::mode_name(kernel_select::mode()),
      cpu::isa_description().c_str(), cpu::has_native_bf16() ? "yes" : "no");
  const Result r20 = time_model("resnet20", steps, false);
  const Result r20_bf16 = time_model("resnet20", steps, true);
  const Result r18 = time_model("resnet18", steps, false);
  const Result r18_bf16 = time_model("resnet18", steps, true);
  std::printf("%-10s %10s %16s %12s %12s | %14s %16s %10s\n", "model", "fp32 img/s", "spread (img/s)", "GFLOP/s",
              "of OpenBLAS", "bf16 img/s", "spread (img/s)", "bf16/fp32");
  for (const auto& [name, r, b] :
       {std::tuple<const char*, const Result&, const Result&>{"resnet20", r20, r20_bf16}, {"resnet18", r18, r18_bf16}})
    std::printf("%-10s %10.1f %7.1f-%-8.1f %12.1f %11.0f%% | %14.1f %7.1f-%-8.1f %10.2f\n", name, r.images_per_second,
                r.slowest_ips, r.fastest_ips, r.gflops, 100 * r.gflops / blas, b.images_per_second, b.slowest_ips,
                b.fastest_ips, b.images_per_second / r.images_per_second);
  std::printf("OpenBLAS sgemm 2048^3 in the same run: %.1f GFLOP/s\n", blas);
  print_passes("resnet20 fp32", r20, steps);
  print_passes("resnet20 bf16 autocast", r20_bf16, steps);
  print_passes("resnet18 fp32", r18, steps);
  print_passes("resnet18 bf16 autocast", r18_bf16, steps);
  std::printf(
      "bench train_step: resnet20_ips=%.1f resnet18_ips=%.1f resnet20_gflops=%.1f resnet18_gflops=%.1f "
      "openblas_gflops=%.1f resnet20_spread=%.1f-%.1f resnet18_spread=%.1f-%.1f resnet20_bf16_ips=%.1f "
      "resnet18_bf16_ips=%.1f resnet20_bf16_spread=%.1f-%.1f resnet18_bf16_spread=%.1f-%.1f native_bf16=%d\n",
      r20.images_per_second, r18.images_per_second, r20.gflops, r18.gflops, blas, r20.slowest_ips, r20.fastest_ips,
      r18.slowest_ips, r18.fastest_ips, r20_bf16.images_per_second, r18_bf16.images_per_second, r20_bf16.slowest_ips,
      r20_bf16.fastest_ips, r18_bf16.slowest_ips, r18_bf16.fastest_ips, cpu::has_native_bf16() ? 1 : 0);
  return 0;
}
