// Small user-defined models shared by the nn tests: Net (a stem conv, a Sequential of two ResNet
// basic blocks, a pool and a head; plus a persistent and a non-persistent buffer) mirrors the Net of
// tools/golden/make_layer_reference.py, so names, state_dict keys and the repr can be compared.
#pragma once

#include "core/ember_core.h"
#include "nn/nn.h"

namespace ember::testing {

struct BasicBlock : nn::Cloneable<BasicBlock> {
  explicit BasicBlock(int64_t planes) : Cloneable("BasicBlock"), planes(planes) { reset(); }
  void reset() override {
    auto conv = [&] { return nn::Conv2d(nn::Conv2dOptions(planes, planes, 3).padding(1).bias(false)); };
    conv1 = register_module("conv1", conv());
    bn1 = register_module("bn1", nn::BatchNorm2d(planes));
    conv2 = register_module("conv2", conv());
    bn2 = register_module("bn2", nn::BatchNorm2d(planes));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(bn1(conv1(x)));
    return relu(bn2(conv2(h)) + x);
  }
  int64_t planes;
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
};

struct Net : nn::Cloneable<Net> {
  Net() : Cloneable("Net") { reset(); }
  void reset() override {
    scale = register_buffer("scale", ones({3}));
    mask = register_buffer("mask", ones({3}), /*persistent=*/false);
    stem = register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, 4, 3).padding(1)));
    layer1 =
        register_module("layer1", nn::Sequential(std::make_shared<BasicBlock>(4), std::make_shared<BasicBlock>(4)));
    pool = register_module("pool", nn::AdaptiveAvgPool2d(1));
    flatten = register_module("flatten", nn::Flatten());
    fc = register_module("fc", nn::Linear(4, 10));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x * scale.view({1, 3, 1, 1}) * mask.view({1, 3, 1, 1});
    return fc(flatten(pool(layer1(stem(h)))));
  }
  Tensor scale, mask;
  nn::Conv2d stem{nullptr};
  nn::Sequential layer1{nullptr};
  nn::AdaptiveAvgPool2d pool{nullptr};
  nn::Flatten flatten{nullptr};
  nn::Linear fc{nullptr};
};

}  // namespace ember::testing
