// Losses as modules: CrossEntropyLoss (label smoothing), NLLLoss, MSELoss, BCEWithLogitsLoss.
// forward(input, target) like PyTorch's; they hold their class weights as buffers.
#pragma once

#include "autograd/functional.h"
#include "nn/module.h"
#include "nn/options.h"

namespace ember::nn {

struct CrossEntropyLossOptions {
  EMBER_ARG(Tensor, weight) = {};
  EMBER_ARG(int64_t, ignore_index) = -100;
  EMBER_ARG(Reduction, reduction) = Reduction::Mean;
  EMBER_ARG(double, label_smoothing) = 0.0;
};

class CrossEntropyLossImpl : public Cloneable<CrossEntropyLossImpl> {
 public:
  explicit CrossEntropyLossImpl(const CrossEntropyLossOptions& options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target);
  CrossEntropyLossOptions options;
  Tensor weight;
};
EMBER_MODULE(CrossEntropyLoss);

struct NLLLossOptions {
  EMBER_ARG(Tensor, weight) = {};
  EMBER_ARG(int64_t, ignore_index) = -100;
  EMBER_ARG(Reduction, reduction) = Reduction::Mean;
};

class NLLLossImpl : public Cloneable<NLLLossImpl> {
 public:
  explicit NLLLossImpl(const NLLLossOptions& options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target);
  NLLLossOptions options;
  Tensor weight;
};
EMBER_MODULE(NLLLoss);

class MSELossImpl : public Cloneable<MSELossImpl> {
 public:
  explicit MSELossImpl(Reduction reduction = Reduction::Mean) : Cloneable("MSELoss"), reduction(reduction) {}
  void reset() override {}
  Tensor forward(const Tensor& input, const Tensor& target) { return mse_loss(input, target, reduction); }
  Reduction reduction;
};
EMBER_MODULE(MSELoss);

struct BCEWithLogitsLossOptions {
  EMBER_ARG(Tensor, weight) = {};
  EMBER_ARG(Tensor, pos_weight) = {};
  EMBER_ARG(Reduction, reduction) = Reduction::Mean;
};

class BCEWithLogitsLossImpl : public Cloneable<BCEWithLogitsLossImpl> {
 public:
  explicit BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options = {});
  void reset() override;
  Tensor forward(const Tensor& input, const Tensor& target);
  BCEWithLogitsLossOptions options;
  Tensor weight, pos_weight;
};
EMBER_MODULE(BCEWithLogitsLoss);

}  // namespace ember::nn
