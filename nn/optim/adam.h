// Adam (L2 weight decay added to the gradient) with optional AMSGrad: PyTorch's torch.optim.Adam
// (single-tensor form), one fused kernel call per parameter. AdamW lives in adamw.h.
//
//   Adam adam(params, AdamOptions(1e-3).betas({0.9, 0.999}).amsgrad(true));
#pragma once

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/backend.h"
#include "nn/optim/optimizer.h"

namespace ember::optim {

using Betas = std::tuple<double, double>;  // (beta1, beta2)

class AdamOptions : public OptimizerOptions {
 public:
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  EMBER_OPTIM_ARG(double, lr);
  EMBER_OPTIM_ARG(Betas, betas) = {0.9, 0.999};
  EMBER_OPTIM_ARG(double, eps) = 1e-8;
  EMBER_OPTIM_ARG(double, weight_decay) = 0.0;
  EMBER_OPTIM_ARG(bool, amsgrad) = false;
  EMBER_OPTIM_ARG(bool, maximize) = false;

 public:
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdamOptions>(*this); }
  const char* type_name() const override { return "AdamOptions"; }
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  bool has_momentum() const override { return true; }
  double get_momentum() const override { return std::get<0>(betas_); }
  void set_momentum(double beta1) override { std::get<0>(betas_) = beta1; }
  void validate(const char* optimizer) const override;
  json::Value to_json() const override;
  void load_json(const json::Value& object) override;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults = AdamOptions());
  Adam(std::vector<Tensor> params, const AdamOptions& defaults = AdamOptions());
  void step() override;

 protected:
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }
};

namespace detail {
// Shared by Adam and AdamW: checks their options, saves them, and runs one update of `param` (which
// has a grad) with `args` (step is filled in from the parameter's state).
void validate_adam_options(const char* optimizer, double lr, const Betas& betas, double eps,
                           double weight_decay);
json::Value adam_options_to_json(double lr, const Betas& betas, double eps,
                                 double weight_decay, bool amsgrad, bool maximize);
// Reads every key adam_options_to_json writes; `where` names the options type in errors.
void adam_options_from_json(const json::Value& object, const std::string& where, double& lr, Betas& betas,
                            double& eps, double& weight_decay, bool& amsgrad, bool& maximize);
void adam_update_param(Optimizer& optimizer, const Tensor& param, AdamUpdateArgs args);
}  // namespace detail

}  // namespace ember::optim
