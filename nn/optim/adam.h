// Adam and AdamW with optional AMSGrad: PyTorch's torch.optim.Adam and torch.optim.AdamW
// (single-tensor form), one fused kernel call per parameter. They differ only in how weight decay
// applies, so one template serves both: Adam adds it to the gradient (default 0), AdamW decays
// the parameter first, param *= 1 - lr * weight_decay (default 1e-2).
//
//   Adam adam(params, AdamOptions(1e-3).betas({0.9, 0.999}).amsgrad(true));
//   AdamW adamw({ParamGroup(weights), ParamGroup(norms_and_biases, AdamWOptions(1e-3).weight_decay(0))},
//               AdamWOptions(1e-3));
#pragma once

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/backend.h"
#include "nn/optim/optimizer.h"

namespace ember::optim {

using Betas = std::tuple<double, double>;  // (beta1, beta2)

template <bool DecoupledWeightDecay>
class AdamOptionsFor : public OptimizerOptions {
 public:
  explicit AdamOptionsFor(double lr = 1e-3) : lr_(lr) {}
  EMBER_ARG(double, lr);
  EMBER_ARG(Betas, betas) = {0.9, 0.999};
  EMBER_ARG(double, eps) = 1e-8;
  EMBER_ARG(double, weight_decay) = DecoupledWeightDecay ? 1e-2 : 0.0;
  EMBER_ARG(bool, amsgrad) = false;
  EMBER_ARG(bool, maximize) = false;

 public:
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdamOptionsFor>(*this); }
  const char* type_name() const override { return DecoupledWeightDecay ? "AdamWOptions" : "AdamOptions"; }
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  bool has_momentum() const override { return true; }
  double get_momentum() const override { return std::get<0>(betas_); }
  void set_momentum(double beta1) override { std::get<0>(betas_) = beta1; }
  void validate(const char* optimizer) const override;
  json::Value to_json() const override;
  void load_json(const json::Value& object) override;
};

template <bool DecoupledWeightDecay>
class AdamFor : public Optimizer {
 public:
  using Options = AdamOptionsFor<DecoupledWeightDecay>;
  AdamFor(std::vector<ParamGroup> groups, const Options& defaults = Options());
  AdamFor(std::vector<Tensor> params, const Options& defaults = Options());
  void step() override;

 protected:
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }
};

using AdamOptions = AdamOptionsFor<false>;
using AdamWOptions = AdamOptionsFor<true>;
using Adam = AdamFor<false>;
using AdamW = AdamFor<true>;

// Both are instantiated once, in adam.cc.
extern template class AdamOptionsFor<false>;
extern template class AdamOptionsFor<true>;
extern template class AdamFor<false>;
extern template class AdamFor<true>;

}  // namespace ember::optim
