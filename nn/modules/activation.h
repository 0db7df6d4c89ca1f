// Stateless layers: activations (ReLU, LeakyReLU, GELU, SiLU, Sigmoid, Tanh, Softmax) and Dropout.
#pragma once

#include "core/random.h"
#include "nn/module.h"
#include "nn/options.h"

namespace ember::nn {

// Defines a parameterless activation module `Name` computing `expr` of `input`.
#define EMBER_ACTIVATION(Name, expr)                              \
  class Name##Impl : public Cloneable<Name##Impl> {               \
   public:                                                        \
    Name##Impl() : Cloneable(#Name) {}                            \
    void reset() override {}                                      \
    Tensor forward(const Tensor& input) override { return expr; } \
  };                                                              \
  EMBER_MODULE(Name)

EMBER_ACTIVATION(ReLU, input.relu());
EMBER_ACTIVATION(SiLU, input.silu());
EMBER_ACTIVATION(Sigmoid, input.sigmoid());
EMBER_ACTIVATION(Tanh, input.tanh());
#undef EMBER_ACTIVATION

class LeakyReLUImpl : public Cloneable<LeakyReLUImpl> {
 public:
  explicit LeakyReLUImpl(double negative_slope = 0.01) : Cloneable("LeakyReLU"), negative_slope(negative_slope) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override { return input.leaky_relu(negative_slope); }
  std::string extra_repr() const override;
  double negative_slope;
};
EMBER_MODULE(LeakyReLU);

class GELUImpl : public Cloneable<GELUImpl> {
 public:
  // approximate: "none" (erf) or "tanh", PyTorch's spelling.
  explicit GELUImpl(std::string approximate = "none");
  void reset() override {}
  Tensor forward(const Tensor& input) override { return input.gelu(approximate == "tanh"); }
  std::string extra_repr() const override { return "approximate='" + approximate + "'"; }
  std::string approximate;
};
EMBER_MODULE(GELU);

class SoftmaxImpl : public Cloneable<SoftmaxImpl> {
 public:
  explicit SoftmaxImpl(int64_t dim) : Cloneable("Softmax"), dim(dim) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};
EMBER_MODULE(Softmax);

// Zeroes with probability p in training (scaling the rest by 1/(1-p)); identity in eval.
class DropoutImpl : public Cloneable<DropoutImpl> {
 public:
  explicit DropoutImpl(double p = 0.5);
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  double p;
  Generator* generator = nullptr;  // default: the global generator
};
EMBER_MODULE(Dropout);

}  // namespace ember::nn
