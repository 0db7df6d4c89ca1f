// DataParallel's memory balance, from the caching allocator's peak statistics per device: with
// per-replica losses cuda:0 holds no more than the other devices (its extra is the parameters'
// gradients and momentum), and with the output gathered on cuda:0 (forward() + loss there) it holds
// more when the output is batch-sized. Both ratios are printed; the measured runs must also train
// as the same model on cuda:0 alone.
#include <catch2/catch.hpp>

#include <functional>
#include <iostream>
#include <sstream>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"
#include "parallel/data_parallel.h"
#include "tests/parallel/data_parallel_helpers.h"

using namespace ember;
using namespace ember::testing;
using parallel::DataParallel;

namespace {

struct Batch {
  Tensor x, y;
};

// Per-pixel classification (dense prediction): full-resolution convolutions and a 1x1 head, so
// each sample's output is [classes, H, W], as in segmentation.
struct DenseNet : nn::Cloneable<DenseNet> {
  explicit DenseNet(int64_t width) : Cloneable("DenseNet"), width(width) { reset(); }
  void reset() override {
    body =
        register_module("body", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, width, 3).padding(1)), nn::ReLU(),
                                               nn::Conv2d(nn::Conv2dOptions(width, width, 3).padding(1)), nn::ReLU()));
    head = register_module("head", nn::Conv2d(width, 8, 1));
  }
  Tensor forward(const Tensor& x) override { return head(body(x)); }
  int64_t width;
  nn::Sequential body{nullptr};
  nn::Conv2d head{nullptr};
};

// Batch 64 on 4 devices. Under ASan the emulator's cost grows with the images (~15x slower): batch
// 32 of 8x8, one measured step, and the dense model only, narrower (parameters shrink as the
// square of the width, activations linearly), so that activations still dominate.
#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kMemoryBatch = 32, kMemorySide = 8, kDenseWidth = 8;
constexpr int kMemorySteps = 1;
constexpr bool kMemoryBothModels = false;
#else
constexpr int64_t kMemoryBatch = 64, kMemorySide = 16, kDenseWidth = 16;
constexpr int kMemorySteps = 2;
constexpr bool kMemoryBothModels = true;
#endif

std::vector<Batch> memory_batches(int64_t classes, bool dense) {
  Generator g(77);
  std::vector<Batch> batches;
  for (int i = 0; i <= kMemorySteps; ++i) {
    batches.push_back({random_images(g, kMemoryBatch, 3, kMemorySide, kMemorySide),
                       dense ? randint(0, classes, {kMemoryBatch, kMemorySide, kMemorySide}, TensorOptions(kInt64), &g)
                             : random_labels(g, kMemoryBatch, classes)});
  }
  return batches;
}

void sgd_steps(nn::Module& model, const std::vector<Batch>& batches, const std::function<Tensor(const Batch&)>& loss,
               const std::function<void(size_t)>& before_step = nullptr) {
  optim::SGD opt(model.parameters(), optim::SGDOptions(0.05).momentum(0.9));
  for (size_t i = 0; i < batches.size(); ++i) {
    if (before_step) before_step(i);
    opt.zero_grad();
    loss(batches[i]).backward();
    opt.step();
  }
}

struct MemoryRun {
  std::vector<int64_t> peaks;  // peak allocated bytes per device over the measured steps
  double ratio = 0;            // cuda:0's peak / the largest other device's
};

// Trains `model` (on cuda:0) through DataParallel on 4 devices with SGD + momentum: one warm-up
// step (it makes the momentum buffers), then the steps whose peak allocated memory per device is
// measured.
MemoryRun measure_memory(const std::shared_ptr<nn::Module>& model, const std::vector<Batch>& batches,
                         bool per_replica_loss) {
  auto dp = std::make_shared<DataParallel>(model, cuda_devices(4));
  auto ce = [](const Tensor& o, const Tensor& t) { return cross_entropy(o, t); };
  sgd_steps(
      *model, batches,
      [&](const Batch& b) {
        return per_replica_loss ? dp->forward_loss(b.x, b.y, ce).loss : ce(dp->forward(b.x), b.y.to(kCuda0));
      },
      [](size_t step) {
        if (step != 1) return;  // after the warm-up step
        for (int d = 0; d < 4; ++d) {
          cuda::synchronize(d);
          cuda::reset_peak_memory_stats(d);
        }
      });
  MemoryRun run;
  int64_t others = 0;
  for (int d = 0; d < 4; ++d) {
    cuda::synchronize(d);
    run.peaks.push_back(cuda::memory_stats(d).peak_allocated_bytes);
    if (d > 0) others = std::max(others, run.peaks.back());
  }
  REQUIRE(others > 0);
  run.ratio = static_cast<double>(run.peaks[0]) / static_cast<double>(others);
  return run;
}

std::string megabytes(const std::vector<int64_t>& peaks) {
  std::ostringstream out;
  out.precision(3);
  for (size_t d = 0; d < peaks.size(); ++d)
    out << (d ? ", " : "") << "cuda:" << d << " " << peaks[d] / 1048576.0 << " MB";
  return out.str();
}

// One model's two measured runs (per-replica loss, gathered output) and the check that both
// trained as cuda:0 alone would.
void check_memory_balance(bool dense) {
  require_four_devices();
  {
    const char* name = dense ? "DenseNet (per-pixel classes)" : "ConvNet (one class per image)";
    INFO(name);
    const int64_t classes = dense ? 8 : 10;
    manual_seed(201);
    std::shared_ptr<nn::Module> model = dense ? std::shared_ptr<nn::Module>(std::make_shared<DenseNet>(kDenseWidth))
                                              : std::make_shared<ConvNet>(3, 16, classes);
    // Off the devices while they are measured.
    std::shared_ptr<nn::Module> reference = model->clone(Device(kCPU)), gathered_model = model->clone(Device(kCPU));
    const std::vector<Batch> batches = memory_batches(classes, dense);
    model->to(kCuda0);
    const MemoryRun per_replica = measure_memory(model, batches, true);
    gathered_model->to(kCuda0);
    const MemoryRun gathered = measure_memory(gathered_model, batches, false);
    std::cout << "DataParallel memory, " << name << ", batch " << kMemoryBatch << " of " << kMemorySide << "x"
              << kMemorySide << " on 4 devices, SGD with momentum; peak allocated per device:\n"
              << "  per-replica loss: " << megabytes(per_replica.peaks)
              << "; cuda:0 / max(others) = " << per_replica.ratio << "\n"
              << "  gathered output:  " << megabytes(gathered.peaks) << "; cuda:0 / max(others) = " << gathered.ratio
              << std::endl;
    CHECK(per_replica.ratio <= 1.15);
    // With a batch-sized output (per-pixel logits) the gathered output, its loss and their
    // gradients land on cuda:0 on top of its replica's share.
    if (dense) CHECK(gathered.ratio >= per_replica.ratio + 0.05);
    // The measured runs trained correctly: the same steps on cuda:0 alone (measured no more).
    reference->to(kCuda0);
    sgd_steps(*reference, batches,
              [&](const Batch& b) { return cross_entropy(reference->forward(b.x.to(kCuda0)), b.y.to(kCuda0)); });
    check_same_state(*model, *reference);
    check_same_state(*gathered_model, *reference);
  }
}

}  // namespace

// Two cases, so that the test's shards measure the models side by side.
TEST_CASE("memory balance, dense output: with per-replica losses cuda:0 peaks no higher than the other devices",
          "[data_parallel][memory][gpus:4]") {
  check_memory_balance(true);
}

TEST_CASE("memory balance, one class per image: with per-replica losses cuda:0 peaks no higher than the others",
          "[data_parallel][memory][gpus:4]") {
  if (kMemoryBothModels) check_memory_balance(false);
}
