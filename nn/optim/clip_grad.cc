// clip_grad_norm_ / clip_grad_value_, step for step as PyTorch 1.13 computes them.
#include "nn/optim/clip_grad.h"

#include <cmath>

#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::optim {

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad().detach());
  }
  if (grads.empty()) return 0.0;

  const bool inf_norm = std::isinf(norm_type) && norm_type > 0;
  const Device device = grads[0].device();
  std::vector<Tensor> norms;
  DType dtype = grads[0].dtype();
  for (const Tensor& g : grads) {
    norms.push_back(to_device(inf_norm ? g.abs().amax() : g.norm(norm_type), device));
    dtype = promote_types(dtype, g.dtype());
  }
  for (Tensor& n : norms) n = n.to(dtype);
  Tensor total;
  if (inf_norm) {
    total = norms.size() == 1 ? norms[0] : stack(norms).amax();
  } else {
    total = stack(norms).norm(norm_type);
  }
  const double total_value = total.item<double>();
  EMBER_CHECK(!error_if_nonfinite || std::isfinite(total_value), "clip_grad_norm_: the total norm of order ", norm_type,
              " of the gradients is non-finite (", total_value,
              "), so it cannot be clipped; pass error_if_nonfinite = false to scale them by it anyway");
  // In the norm's dtype, like PyTorch's tensor arithmetic (1e-6 keeps a zero norm from dividing by 0).
  const Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (Tensor& g : grads) g.mul_(to_device(coef, g.device()).to(g.dtype()));
  return total_value;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  EMBER_CHECK(clip_value >= 0.0, "clip_grad_value_: expected clip_value >= 0, got ", clip_value);
  NoGradGuard no_grad;
  for (const Tensor& p : parameters) {
    if (!p.defined() || !p.grad().defined()) continue;
    Tensor g = p.grad().detach();
    g.clamp_(-clip_value, clip_value);
  }
}

}  // namespace ember::optim
