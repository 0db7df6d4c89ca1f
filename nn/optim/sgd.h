// SGD with momentum, dampening, Nesterov momentum and L2 weight decay: PyTorch's torch.optim.SGD
// (single-tensor form), one fused kernel call per parameter.
//
//   SGD sgd(params, SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(5e-4));
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/optim/optimizer.h"

namespace ember::optim {

class SGDOptions : public OptimizerOptions {
 public:
  explicit SGDOptions(double lr) : lr_(lr) {}
  EMBER_ARG(double, lr);
  EMBER_ARG(double, momentum) = 0.0;
  EMBER_ARG(double, dampening) = 0.0;
  EMBER_ARG(double, weight_decay) = 0.0;
  EMBER_ARG(bool, nesterov) = false;
  EMBER_ARG(bool, maximize) = false;

 public:
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<SGDOptions>(*this); }
  const char* type_name() const override { return "SGDOptions"; }
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }
  bool has_momentum() const override { return true; }
  double get_momentum() const override { return momentum_; }
  void set_momentum(double momentum) override { momentum_ = momentum; }
  void validate(const char* optimizer) const override;
  json::Value to_json() const override;
  void load_json(const json::Value& object) override;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults);
  SGD(std::vector<Tensor> params, const SGDOptions& defaults);
  void step() override;

 protected:
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
};

}  // namespace ember::optim
