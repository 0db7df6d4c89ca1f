// ResNet-20 trained for 3 steps of SGD with momentum on emulated cuda:0 ends where the same steps
// on the CPU end: every parameter and batch-norm buffer within rtol 1e-4. This runs every kernel
// of a training step on the device: conv (forward, backward-data, backward-weight), batch norm
// with the fused ReLU, pooling, GEMM, cross-entropy, and the fused update.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "cuda/conv.h"
#include "models/resnet.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"

using namespace ember;

namespace {

// Under AddressSanitizer the emulator runs ~15x slower: a smaller batch of smaller images (the
// network ends in adaptive pooling) runs the same kernels within the test's time limit.
#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kBatch = 2, kSide = 16;
#else
constexpr int64_t kBatch = 4, kSide = 32;
#endif

std::vector<std::pair<std::string, Tensor>> state(const nn::Module& m) {
  auto out = m.named_parameters();
  for (auto& b : m.named_buffers()) out.push_back(b);
  return out;
}

}  // namespace

TEST_CASE("three ResNet-20 SGD steps on cuda:0 equal the same steps on the CPU") {
  REQUIRE(cuda::device_count() >= 1);
  // Within 1e-4 of the CPU needs float32 convolutions in full precision: cuDNN's TF32 (on by
  // default, on real GPUs) rounds their inputs to 10 mantissa bits.
  cuda::set_cudnn_allow_tf32(false);
  const Device cuda0 = Device::cuda(0);
  manual_seed(7);
  auto cpu_model = models::resnet20(3, 10);
  manual_seed(7);
  auto gpu_model = models::resnet20(3, 10);
  gpu_model->to(cuda0);
  optim::SGD cpu_opt(cpu_model->parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4));
  optim::SGD gpu_opt(gpu_model->parameters(), optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4));
  manual_seed(21);
  const Tensor images = randn({kBatch, 3, kSide, kSide});
  const Tensor labels = randint(0, 10, {kBatch}, TensorOptions(kInt64));
  for (int step = 0; step < 3; ++step) {
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    cross_entropy(cpu_model->forward(images), labels).backward();
    cross_entropy(gpu_model->forward(images.to(cuda0)), labels.to(cuda0)).backward();
    cpu_opt.step();
    gpu_opt.step();
  }
  const auto want = state(*cpu_model), got = state(*gpu_model);
  REQUIRE(want.size() == got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].first);
    REQUIRE(got[i].second.device() == cuda0);
    const Tensor expected = want[i].second.to(kFloat64), actual = got[i].second.cpu().to(kFloat64);
    const double error = (actual - expected).abs().amax().item<double>();
    const double scale = expected.abs().amax().item<double>();
    CHECK(error <= 1e-4 * std::max(scale, 1e-2));
  }
  cuda::set_cudnn_allow_tf32(true);
}
