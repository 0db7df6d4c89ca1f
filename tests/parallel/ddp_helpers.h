// Shared pieces of the DDP tests: small deterministic models and batches, one SGD step written
// out by hand, and comparisons with a reference model. One source serves both backends: the
// distributed side runs on rank_device() (the CPU, or cuda:LOCAL_RANK in targets built with
// EMBER_TEST_DEVICE=cuda, over NCCL), the single-process reference always on the CPU.
#pragma once

#include <catch2/catch.hpp>

#include "comm/init.h"
#include "core/ember_core.h"
#include "nn/nn.h"
#include "tests/test_device.h"

namespace ember::testing {

// This rank's device: one GPU per rank, as under a real launcher.
inline Device rank_device() {
  static const Device device =
      test::kTestDevice.is_cuda() ? Device::cuda(comm::read_environment().local_rank) : Device(kCPU);
  return device;
}

// `model`, moved to this rank's device (models are built on the CPU from a seed).
inline std::shared_ptr<nn::Module> on_rank_device(std::shared_ptr<nn::Module> model) {
  model->to(rank_device());
  return model;
}

struct Batch {
  Tensor x, y;
  // Rank r's contiguous slice of an evenly divisible batch.
  Batch shard(int rank, int ranks) const {
    int64_t n = x.size(0) / ranks;
    return {x.narrow(0, rank * n, n), y.narrow(0, rank * n, n)};
  }
  Batch to(Device device) const { return {x.to(device), y.to(device)}; }
  // Rank r's shard on its device: what that rank's DDP model trains on.
  Batch rank_shard(int rank, int ranks) const { return shard(rank, ranks).to(rank_device()); }
};

inline Batch make_batch(int64_t n, uint64_t seed) {
  Generator g(seed);
  return {randn({n, 1, 6, 6}, {}, &g), randint(0, 4, {n}, TensorOptions(kInt64), &g)};
}

// A two-layer MLP / a conv net with batch norm, both with weights from `seed`.
inline std::shared_ptr<nn::Module> make_mlp(uint64_t seed) {
  manual_seed(seed);
  return nn::Sequential(nn::Flatten(), nn::Linear(36, 24), nn::ReLU(), nn::Linear(24, 4)).ptr();
}

struct SmallCnn : nn::Cloneable<SmallCnn> {
  SmallCnn() : Cloneable("SmallCnn") { reset(); }
  void reset() override {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 6, 3).padding(1).bias(false)));
    conv2 = register_module("conv2", nn::Conv2d(6, 8, 3));
    fc = register_module("fc", nn::Linear(8, 4));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = conv1(x).relu();
    h = conv2(h).relu();
    return fc(adaptive_avg_pool2d(h, 1).flatten(1));
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::Linear fc{nullptr};
};

// With batch norm (its running statistics are the buffers DDP broadcasts).
struct BnCnn : nn::Cloneable<BnCnn> {
  BnCnn() : Cloneable("BnCnn") { reset(); }
  void reset() override {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 6, 3).padding(1).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(6));
    fc = register_module("fc", nn::Linear(6, 4));
  }
  Tensor forward(const Tensor& x) override { return fc(adaptive_avg_pool2d(bn1(conv1(x)).relu(), 1).flatten(1)); }
  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  nn::Linear fc{nullptr};
};

inline std::shared_ptr<nn::Module> make_cnn(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<BnCnn>();
}

inline std::shared_ptr<nn::Module> make_plain_cnn(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<SmallCnn>();
}

// Uses only head_a: head_b never receives a gradient.
struct TwoHeads : nn::Cloneable<TwoHeads> {
  TwoHeads() : Cloneable("TwoHeads") { reset(); }
  void reset() override {
    manual_seed(9);
    body = register_module("body", nn::Linear(36, 12));
    head_a = register_module("head_a", nn::Linear(12, 4));
    head_b = register_module("head_b", nn::Linear(12, 4));
  }
  Tensor forward(const Tensor& x) override { return head_a(body(x.flatten(1)).relu()); }
  nn::Linear body{nullptr}, head_a{nullptr}, head_b{nullptr};
};

inline Tensor loss_of(nn::Module& model, const Batch& batch) { return cross_entropy(model.forward(batch.x), batch.y); }

inline void sgd_step(nn::Module& model, const Batch& batch, double lr) {
  model.zero_grad();
  loss_of(model, batch).backward();
  NoGradGuard no_grad;
  for (Tensor& p : model.parameters())
    if (p.grad().defined()) p.sub_(p.grad(), lr);
}

inline void require_close(const Tensor& a, const Tensor& b, double rtol, const std::string& what) {
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  REQUIRE(x.size() == y.size());
  double scale = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < x.size(); ++i) {
    INFO(what << " element " << i << ": " << x[i] << " vs " << y[i]);
    REQUIRE(std::abs(x[i] - y[i]) <= rtol * (std::abs(y[i]) + 1e-3 * scale) + 1e-7);
  }
}

inline void require_same_parameters(nn::Module& a, nn::Module& b, double rtol) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    REQUIRE(pa[i].first == pb[i].first);
    require_close(pa[i].second, pb[i].second, rtol, pa[i].first);
  }
}

// a's gradients vs b's scaled by `scale`.
inline void require_same_gradients(nn::Module& a, nn::Module& b, double scale, double rtol) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    REQUIRE(pa[i].second.grad().defined());
    require_close(pa[i].second.grad(), pb[i].second.grad() * scale, rtol, "grad " + pa[i].first);
  }
}

}  // namespace ember::testing
