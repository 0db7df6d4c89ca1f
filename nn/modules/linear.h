// Linear (y = x Wᵀ + b), Identity and Flatten.
#pragma once

#include "nn/module.h"
#include "nn/options.h"

namespace ember::nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  EMBER_ARG(int64_t, in_features);
  EMBER_ARG(int64_t, out_features);
  EMBER_ARG(bool, bias) = true;
};

// weight [out, in] and bias [out] start uniform in ±1/sqrt(in), PyTorch's default.
class LinearImpl : public Cloneable<LinearImpl> {
 public:
  LinearImpl(int64_t in_features, int64_t out_features) : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const LinearOptions& options);
  void reset() override;
  void reset_parameters();
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  LinearOptions options;
  Tensor weight, bias;
};
EMBER_MODULE(Linear);

class IdentityImpl : public Cloneable<IdentityImpl> {
 public:
  IdentityImpl() : Cloneable("Identity") {}
  void reset() override {}
  Tensor forward(const Tensor& input) override { return input; }
};
EMBER_MODULE(Identity);

struct FlattenOptions {
  EMBER_ARG(int64_t, start_dim) = 1;
  EMBER_ARG(int64_t, end_dim) = -1;
};

class FlattenImpl : public Cloneable<FlattenImpl> {
 public:
  explicit FlattenImpl(const FlattenOptions& options = {}) : Cloneable("Flatten"), options(options) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override { return input.flatten(options.start_dim(), options.end_dim()); }
  std::string extra_repr() const override;

  FlattenOptions options;
};
EMBER_MODULE(Flatten);

}  // namespace ember::nn
