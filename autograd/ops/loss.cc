// Losses, composed from differentiable ops so their gradients follow: nll_loss, cross_entropy
// (with label smoothing exactly as PyTorch defines it), mse_loss, binary_cross_entropy_with_logits.
#include <cmath>

#include "autograd/functional.h"
#include "core/autocast.h"
#include "core/device_check.h"
#include "core/factory.h"
#include "core/ops.h"

namespace ember {

namespace {

Tensor reduce_loss(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::None:
      return loss;
    case Reduction::Sum:
      return loss.sum();
    case Reduction::Mean:
      return loss.mean();
  }
  return loss;
}

void check_classification(const char* op, const Tensor& input, const Tensor& target, const Tensor& weight) {
  common_device(op, {{input, "input"}, {target, "target"}, {weight, "weight"}});
  EMBER_CHECK(input.dim() >= 2, op, ": expected input of at least 2 dims [N, C, ...], got ", shape_str(input.sizes()));
  EMBER_CHECK(is_floating(input.dtype()), op, ": expected a floating input, got ", dtype_name(input.dtype()));
  EMBER_CHECK(target.dtype() == kInt64, op, ": expected target of class indices with dtype int64, got ",
              dtype_name(target.dtype()));
  Shape expected = input.sizes();
  expected.erase(expected.begin() + 1);
  EMBER_CHECK(target.sizes() == expected, op, ": expected target of shape ", shape_str(expected), " for input ",
              shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
  if (weight.defined()) {
    EMBER_CHECK(weight.dim() == 1 && weight.size(0) == input.size(1), op, ": expected a class weight of shape [",
                input.size(1), "], got ", shape_str(weight.sizes()));
    EMBER_CHECK(is_floating(weight.dtype()), op, ": expected a floating class weight, got ",
                dtype_name(weight.dtype()));
  }
}

// Per-class weights shaped to broadcast over dim 1 of an [N, C, ...] tensor.
Tensor class_weight_view(const Tensor& weight, int64_t ndim) {
  Shape shape(ndim, 1);
  shape[1] = weight.size(0);
  return weight.view(shape);
}

// nll_loss on checked arguments; `op` is the loss the user called.
Tensor checked_nll_loss(const char* op, const Tensor& input, const Tensor& target, const Tensor& weight,
                        Reduction reduction, int64_t ignore_index) {
  const int64_t classes = input.size(1);
  // Scalars are 0-dim CPU tensors: they join a target on any device without a device allocation.
  const Tensor zero = zeros({}, TensorOptions(kInt64));
  Tensor ignore = target == full({}, ignore_index, TensorOptions(kInt64));
  if (target.device().is_cpu()) {
    Tensor bad = ((target < zero) + (target >= full({}, classes, TensorOptions(kInt64)))) * ~ignore;
    EMBER_CHECK(bad.sum().item<int64_t>() == 0, op, ": target values must lie in [0, ", classes,
                ") or equal ignore_index (", ignore_index, ")");
  }
  // On a GPU that check would synchronise every step. There the gathers below check the targets
  // on the device instead, and an out-of-range class surfaces as gather's error (naming the
  // value) at the next synchronisation, such as the loss's item().
  Tensor safe_target = where(ignore, zero, target);
  Tensor picked = gather(input, 1, safe_target.unsqueeze(1)).squeeze(1);
  Tensor keep = (~ignore).to(input.dtype());
  Tensor w = weight.defined()
                 ? gather(weight.to(input.dtype()), 0, safe_target.reshape({-1})).view(target.sizes()) * keep
                 : keep;
  Tensor loss = -picked * w;
  if (reduction == Reduction::Mean) return loss.sum() / w.sum();
  return reduce_loss(loss, reduction);
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction,
                int64_t ignore_index) {
  if (autocast::Scope cast{autocast::Op::nll_loss, {&input, &target, &weight}})
    return nll_loss(cast[0], cast[1], cast[2], reduction, ignore_index);
  check_classification("nll_loss", input, target, weight);
  return checked_nll_loss("nll_loss", input, target, weight, reduction, ignore_index);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction,
                     int64_t ignore_index, double label_smoothing) {
  if (autocast::Scope cast{autocast::Op::cross_entropy, {&input, &target, &weight}})
    return cross_entropy(cast[0], cast[1], cast[2], reduction, ignore_index, label_smoothing);
  check_classification("cross_entropy", input, target, weight);
  EMBER_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
              "cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing);
  Tensor log_probs = log_softmax(input, 1);
  Tensor nll = checked_nll_loss("cross_entropy", log_probs, target, weight, reduction, ignore_index);
  if (label_smoothing == 0.0) return nll;
  const int64_t classes = input.size(1);
  Tensor ignore = target == full({}, ignore_index, TensorOptions(kInt64));
  Tensor keep = (~ignore).to(input.dtype());
  Tensor smooth = weight.defined() ? -(log_probs * class_weight_view(weight.to(input.dtype()), input.dim())).sum({1})
                                   : -log_probs.sum({1});
  smooth = smooth * keep;
  Tensor reduced;
  switch (reduction) {
    case Reduction::Mean:
      if (weight.defined()) {
        Tensor safe_target = where(ignore, zeros({}, TensorOptions(kInt64)), target);
        Tensor w = gather(weight.to(input.dtype()), 0, safe_target.reshape({-1})).view(target.sizes()) * keep;
        reduced = smooth.sum() / w.sum();
      } else {
        reduced = smooth.sum() / keep.sum();
      }
      break;
    case Reduction::Sum:
      reduced = smooth.sum();
      break;
    case Reduction::None:
      reduced = smooth;
      break;
  }
  return nll * (1.0 - label_smoothing) + reduced * (label_smoothing / static_cast<double>(classes));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (autocast::Scope cast{autocast::Op::mse_loss, {&input, &target}}) return mse_loss(cast[0], cast[1], reduction);
  common_device("mse_loss", {{input, "input"}, {target, "target"}}, CpuScalars::Allowed);
  EMBER_CHECK(input.sizes() == target.sizes(), "mse_loss: expected input and target of the same shape, got ",
              shape_str(input.sizes()), " and ", shape_str(target.sizes()));
  Tensor diff = input - target;
  return reduce_loss(diff * diff, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, Reduction reduction) {
  if (autocast::Scope cast{autocast::Op::binary_cross_entropy_with_logits, {&input, &target, &weight, &pos_weight}})
    return binary_cross_entropy_with_logits(cast[0], cast[1], cast[2], cast[3], reduction);
  common_device("binary_cross_entropy_with_logits",
                {{input, "input"}, {target, "target"}, {weight, "weight"}, {pos_weight, "pos_weight"}},
                CpuScalars::Allowed);
  EMBER_CHECK(is_floating(input.dtype()), "binary_cross_entropy_with_logits: expected a floating input, got ",
              dtype_name(input.dtype()));
  EMBER_CHECK(input.sizes() == target.sizes(), "binary_cross_entropy_with_logits: expected target of shape ",
              shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
  // (1 - t) x + l (log(1 + exp(-|x|)) + max(-x, 0)), l = 1 + (pos_weight - 1) t: stable for any x.
  Tensor softplus_neg = (-input.abs()).exp().log1p() + (-input).relu();
  Tensor loss;
  if (pos_weight.defined()) {
    Tensor log_weight = (pos_weight - 1.0) * target + 1.0;
    loss = (1.0 - target) * input + log_weight * softplus_neg;
  } else {
    loss = (1.0 - target) * input + softplus_neg;
  }
  if (weight.defined()) loss = loss * weight;
  return reduce_loss(loss, reduction);
}

}  // namespace ember
