// AdamW: Adam with decoupled weight decay (param *= 1 - lr * weight_decay before the update), as
// torch.optim.AdamW (single-tensor form); the default weight_decay is 1e-2.
//
//   AdamW adamw({ParamGroup(weights), ParamGroup(norms_and_biases, AdamWOptions(1e-3).weight_decay(0))},
//               AdamWOptions(1e-3));
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/optim/adam.h"

namespace ember::optim {

class AdamWOptions : public OptimizerOptions {
 public:
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  EMBER_OPTIM_ARG(double, lr);
  EMBER_OPTIM_ARG(Betas, betas) = {0.9, 0.999};
  EMBER_OPTIM_ARG(double, eps) = 1e-8;
  EMBER_OPTIM_ARG(double, weight_decay) = 1e-2;
  EMBER_OPTIM_ARG(bool, amsgrad) = false;
  EMBER_OPTIM_ARG(bool, maximize) = false;

 public:
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdamWOptions>(*this); }
  const char* type_name() const override { return "AdamWOptions"; }
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  bool has_momentum() const override { return true; }
  double get_momentum() const override { return std::get<0>(betas_); }
  void set_momentum(double beta1) override { std::get<0>(betas_) = beta1; }
  void validate(const char* optimizer) const override;
  json::Value to_json() const override;
  void load_json(const json::Value& object) override;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& defaults = AdamWOptions());
  AdamW(std::vector<Tensor> params, const AdamWOptions& defaults = AdamWOptions());
  void step() override;

 protected:
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }
};

}  // namespace ember::optim
