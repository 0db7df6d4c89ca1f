// ParamGroup: parameters that share hyper-parameters (e.g. no weight decay on biases and BN).
// Without options, a group takes the optimizer's defaults when it is added.
//
//   SGD sgd({ParamGroup(weights, SGDOptions(0.1).weight_decay(5e-4)), ParamGroup(biases)}, SGDOptions(0.1));
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "nn/optim/optimizer_options.h"

namespace ember::optim {

class ParamGroup {
 public:
  ParamGroup(std::vector<Tensor> params);  // NOLINT: implicit, so a bare list is a group
  ParamGroup(std::vector<Tensor> params, const OptimizerOptions& options);
  ParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options);
  ParamGroup(const ParamGroup& other);  // copies the options too
  ParamGroup& operator=(const ParamGroup& other);
  ParamGroup(ParamGroup&&) noexcept = default;
  ParamGroup& operator=(ParamGroup&&) noexcept = default;

  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }
  bool has_options() const { return options_ != nullptr; }
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }

 private:
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
};

}  // namespace ember::optim
