// README.md's 20-line model as written, with a check that it trained: built by CMake here, by
// examples/pkg_config (g++ and pkg-config) and examples/bazel_project (@ember) against an
// installed Ember or its sources (tests/install), and in Ember's own tree by
// //tests/examples:readme_model_test, so the README cannot drift from the API.
#include <cstdio>

#include "core/ember_core.h"
#include "nn/nn.h"
#include "nn/optim/sgd.h"

using namespace ember;

struct Net : nn::Cloneable<Net> {
  Net() : Cloneable("Net") { reset(); }
  void reset() override {
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1).bias(false)));
    bn = register_module("bn", nn::BatchNorm2d(16));
    fc = register_module("fc", nn::Linear(16, 10));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(bn(conv(x)));
    return fc(adaptive_avg_pool2d(h, 1).flatten(1));
  }
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
  nn::Linear fc{nullptr};
};

int main() {
  manual_seed(0);
  auto net = std::make_shared<Net>();
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Tensor x = randn({32, 1, 28, 28}), y = randint(0, 10, {32});
  double first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  // Random labels on noise: a 16-feature model can only partly fit them, but a model whose
  // gradients or updates did not work would stay at its first loss.
  const bool trained = first > 2.0 && last < first - 0.15;
  std::printf("readme_model: ember %s, loss %.4f -> %.4f%s\n", version(), first, last,
              trained ? "" : ": did NOT train");
  return trained ? 0 : 1;
}
