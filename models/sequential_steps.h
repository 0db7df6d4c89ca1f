// The steps as_sequential puts between a zoo model's own layers where the model's forward computes
// something inline: ResNet-9's residual sums, its global max-pool and its logit scale. None holds
// a parameter of its own.
#pragma once

#include <vector>

#include "nn/nn.h"

namespace ember::models {

// x + body(x). The body's entries are registered as this module's own children, under their
// names, so its keys are those of `body` where the model registered it ("res1.0.conv.weight").
class ResidualImpl : public nn::Cloneable<ResidualImpl> {
 public:
  explicit ResidualImpl(nn::Sequential body);
  void reset() override;  // a clone re-registers a clone of the body
  Tensor forward(const Tensor& x) override { return x + body(x); }
  nn::Sequential body;

 private:
  void register_body();
};
EMBER_MODULE(Residual);

// The maximum over the spatial dims: [N, C, H, W] -> [N, C].
class GlobalMaxPoolImpl : public nn::Cloneable<GlobalMaxPoolImpl> {
 public:
  GlobalMaxPoolImpl() : Cloneable("GlobalMaxPool") {}
  void reset() override {}
  Tensor forward(const Tensor& x) override { return x.amax({2, 3}); }
};
EMBER_MODULE(GlobalMaxPool);

class ScaleImpl : public nn::Cloneable<ScaleImpl> {
 public:
  explicit ScaleImpl(double factor) : Cloneable("Scale"), factor(factor) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override { return x * factor; }
  std::string extra_repr() const override;
  double factor;
};
EMBER_MODULE(Scale);

}  // namespace ember::models
