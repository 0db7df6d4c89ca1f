// ParamGroup: a list of parameters and the options that own their hyper-parameters.
#include "nn/optim/param_group.h"

namespace ember::optim {

ParamGroup::ParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}

ParamGroup::ParamGroup(std::vector<Tensor> params, const OptimizerOptions& options)
    : params_(std::move(params)), options_(options.clone()) {}

ParamGroup::ParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
    : params_(std::move(params)), options_(std::move(options)) {}

ParamGroup::ParamGroup(const ParamGroup& other)
    : params_(other.params_), options_(other.options_ ? other.options_->clone() : nullptr) {}

ParamGroup& ParamGroup::operator=(const ParamGroup& other) {
  if (this != &other) {
    params_ = other.params_;
    options_ = other.options_ ? other.options_->clone() : nullptr;
  }
  return *this;
}

OptimizerOptions& ParamGroup::options() {
  EMBER_CHECK(options_ != nullptr, "ParamGroup: the group has no options until it is added to an optimizer");
  return *options_;
}

const OptimizerOptions& ParamGroup::options() const {
  EMBER_CHECK(options_ != nullptr, "ParamGroup: the group has no options until it is added to an optimizer");
  return *options_;
}

}  // namespace ember::optim
