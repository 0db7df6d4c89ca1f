// A model whose parameters shard unevenly: for the sharded data-parallel tests.
#pragma once

#include <memory>

#include "core/ember_core.h"
#include "nn/nn.h"

namespace ember::testing {

// Rows chosen not to divide by 2, 3 or 4 (23, 5, 7), one parameter with fewer rows than ranks
// (the [1] bias of `gate`), and a 0-dim one (`temperature`). The convolution has no bias: batch
// norm cancels it, so its gradient would be rounding noise that Adam scales up to whole steps.
struct OddShapes : nn::Cloneable<OddShapes> {
  OddShapes() : Cloneable("OddShapes") { reset(); }
  void reset() override {
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(1, 7, 3).padding(1).bias(false)));
    bn = register_module("bn", nn::BatchNorm2d(7));
    fc1 = register_module("fc1", nn::Linear(7 * 36, 23));
    fc2 = register_module("fc2", nn::Linear(23, 5));
    gate = register_module("gate", nn::Linear(5, 1));
    temperature = register_parameter("temperature", full({}, 1.5));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = bn(conv(x)).relu().flatten(1);
    Tensor logits = fc2(fc1(h).relu());
    return logits * gate(logits).sigmoid() / temperature;
  }
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr}, gate{nullptr};
  Tensor temperature;
};

inline std::shared_ptr<nn::Module> make_odd(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<OddShapes>();
}

}  // namespace ember::testing
