// Training-step benchmark: images/s of a full step (forward, cross-entropy, backward, SGD with
// momentum) of ResNet-20 and ResNet-18 (CIFAR stem) on a synthetic CIFAR batch, and the FLOP rate
// it achieves next to OpenBLAS's sgemm rate measured in the same run.
//
//   bazel run --config=bench //tools/bench:train_step [-- steps]
//   tools/bench/train_step_vs_torch      (this program next to PyTorch CPU, as a ratio)
//
// FLOPs of a step = 3 x the forward's (backward-data and backward-weight cost what the forward
// does), forward = sum over convolutions of 2*N*O*OH*OW*(C/groups)*KH*KW plus 2*N*in*out per
// linear layer, counted exactly by routing one forward through a counting copy of the CPU kernel
// table. Batch 128, 2 threads, float32, median step after 3 warm-up steps.
#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "autograd/functional.h"
#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"
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
};

Result time_model(const std::string& name, int steps) {
  manual_seed(0);
  auto model = models::make_model(name, 3, 32, 10);
  model->train();
  Tensor images = randn({kBatch, 3, 32, 32}), labels = randint(0, 10, {kBatch});
  const double step_flops = 3.0 * kBatch * bench::take_census(*model, {3, 32, 32}).forward_flops_per_image;
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4));
  std::vector<double> times;
  for (int step = 0; step < steps + 3; ++step) {
    const double start = bench::now_seconds();
    optimizer.zero_grad();
    Tensor loss = cross_entropy(model->forward(images), labels);
    loss.backward();
    optimizer.step();
    if (step >= 3) times.push_back(bench::now_seconds() - start);
  }
  const double seconds = bench::median(times);
  return {kBatch / seconds, step_flops / seconds * 1e-9};
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
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  cpu::set_num_threads(kThreads);
  openblas_set_num_threads(kThreads);
  const double blas = openblas_gflops();
  std::printf("train_step benchmark: batch %lld, 3x32x32, fp32, %d threads, SGD momentum 0.9, median of %d steps\n",
              static_cast<long long>(kBatch), kThreads, steps);
  std::printf("%-10s %10s %12s %14s\n", "model", "images/s", "GFLOP/s", "of OpenBLAS");
  const Result r20 = time_model("resnet20", steps);
  std::printf("%-10s %10.1f %12.1f %13.0f%%\n", "resnet20", r20.images_per_second, r20.gflops, 100 * r20.gflops / blas);
  const Result r18 = time_model("resnet18", std::max(3, steps / 3));
  std::printf("%-10s %10.1f %12.1f %13.0f%%\n", "resnet18", r18.images_per_second, r18.gflops, 100 * r18.gflops / blas);
  std::printf("OpenBLAS sgemm 2048^3 in the same run: %.1f GFLOP/s\n", blas);
  std::printf("bench train_step: resnet20_ips=%.1f resnet18_ips=%.1f resnet20_gflops=%.1f resnet18_gflops=%.1f "
              "openblas_gflops=%.1f\n",
              r20.images_per_second, r18.images_per_second, r20.gflops, r18.gflops, blas);
  return 0;
}
