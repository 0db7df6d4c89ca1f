// DataParallel on emulated devices.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"
#include "parallel/data_parallel.h"
#include "parallel/sync_batch_norm.h"

using namespace ember;

namespace {

struct Mlp : nn::Cloneable<Mlp> {
  Mlp() { reset(); }
  void reset() override {
    fc1 = register_module("fc1", nn::Linear(6, 16));
    bn = register_module("bn", nn::BatchNorm1d(16));
    fc2 = register_module("fc2", nn::Linear(16, 3));
  }
  Tensor forward(const Tensor& x) override { return fc2(relu(bn(fc1(x)))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::BatchNorm1d bn{nullptr};
};

std::vector<Device> devices(int n) {
  std::vector<Device> out;
  for (int i = 0; i < n; ++i) out.push_back(Device::cuda(i));
  return out;
}

double max_rel(const Tensor& a, const Tensor& b) {
  Tensor x = a.to(Device(kCPU)).to(kFloat64), y = b.to(Device(kCPU)).to(kFloat64);
  return ((x - y).abs() / (y.abs() + 1e-6)).max().item<double>();
}

}  // namespace

TEST_CASE("smoke: DataParallel with SyncBN trains like one device") {
  for (bool per_replica_loss : {false, true}) {
    manual_seed(3);
    auto single = std::make_shared<Mlp>();
    parallel::convert_sync_batchnorm(*single);
    manual_seed(3);
    auto master = std::make_shared<Mlp>();
    parallel::convert_sync_batchnorm(*master);
    single->to(Device::cuda(0));
    master->to(Device::cuda(0));
    auto dp = std::make_shared<parallel::DataParallel>(master, devices(3));
    optim::SGD o1(single->parameters(), optim::SGDOptions(0.1));
    optim::SGD o2(master->parameters(), optim::SGDOptions(0.1));
    manual_seed(5);
    for (int step = 0; step < 3; ++step) {
      Tensor x = randn({11, 6});
      Tensor y = randint(0, 3, {11}, TensorOptions(kInt64));
      o1.zero_grad();
      o2.zero_grad();
      cross_entropy(single->forward(x.to(Device::cuda(0))), y.to(Device::cuda(0))).backward();
      if (per_replica_loss) {
        dp->forward_loss(x, y, [](const Tensor& o, const Tensor& t) { return cross_entropy(o, t); }).loss.backward();
      } else {
        cross_entropy(dp->forward(x), y.to(Device::cuda(0))).backward();
      }
      o1.step();
      o2.step();
    }
    auto a = single->named_parameters();
    auto b = master->named_parameters();
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(a[i].first);
      CHECK(max_rel(b[i].second, a[i].second) < 1e-5);
    }
  }
}
