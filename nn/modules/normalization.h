// LayerNorm over the trailing `normalized_shape` dims, with elementwise affine weight and bias.
#pragma once

#include "nn/module.h"
#include "nn/options.h"

namespace ember::nn {

struct LayerNormOptions {
  LayerNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT
  EMBER_ARG(Shape, normalized_shape);
  EMBER_ARG(double, eps) = 1e-5;
  EMBER_ARG(bool, elementwise_affine) = true;
};

class LayerNormImpl : public Cloneable<LayerNormImpl> {
 public:
  explicit LayerNormImpl(const LayerNormOptions& options);
  void reset() override;
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  LayerNormOptions options;
  Tensor weight, bias;
};
EMBER_MODULE(LayerNorm);

}  // namespace ember::nn
