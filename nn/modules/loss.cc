// Loss modules: weights registered as buffers (so .to(device) moves them), forward delegates.
#include "nn/modules/loss.h"

namespace ember::nn {

CrossEntropyLossImpl::CrossEntropyLossImpl(const CrossEntropyLossOptions& options_in)
    : Cloneable("CrossEntropyLoss"), options(options_in) {
  reset();
}

void CrossEntropyLossImpl::reset() {
  weight = options.weight().defined() ? register_buffer("weight", options.weight()) : Tensor();
}

Tensor CrossEntropyLossImpl::forward(const Tensor& input, const Tensor& target) {
  return cross_entropy(input, target, weight, options.reduction(), options.ignore_index(), options.label_smoothing());
}

NLLLossImpl::NLLLossImpl(const NLLLossOptions& options_in) : Cloneable("NLLLoss"), options(options_in) { reset(); }

void NLLLossImpl::reset() {
  weight = options.weight().defined() ? register_buffer("weight", options.weight()) : Tensor();
}

Tensor NLLLossImpl::forward(const Tensor& input, const Tensor& target) {
  return nll_loss(input, target, weight, options.reduction(), options.ignore_index());
}

BCEWithLogitsLossImpl::BCEWithLogitsLossImpl(const BCEWithLogitsLossOptions& options_in)
    : Cloneable("BCEWithLogitsLoss"), options(options_in) {
  reset();
}

void BCEWithLogitsLossImpl::reset() {
  weight = options.weight().defined() ? register_buffer("weight", options.weight()) : Tensor();
  pos_weight = options.pos_weight().defined() ? register_buffer("pos_weight", options.pos_weight()) : Tensor();
}

Tensor BCEWithLogitsLossImpl::forward(const Tensor& input, const Tensor& target) {
  return binary_cross_entropy_with_logits(input, target, weight, pos_weight, options.reduction());
}

}  // namespace ember::nn
