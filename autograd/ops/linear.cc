// linear: y = x Wᵀ + b over the last dim of x, composed of matmul and add (their gradients apply).
#include "autograd/functional.h"
#include "core/ops.h"

namespace ember {

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  EMBER_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out_features, in_features], got ",
              shape_str(weight.sizes()));
  EMBER_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(1), "linear: input's last dim (",
              input.dim() >= 1 ? input.size(-1) : 0, ") must match in_features of weight ", shape_str(weight.sizes()),
              "; input shape ", shape_str(input.sizes()));
  Tensor out = matmul(input, weight.t());
  if (bias.defined()) {
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: expected bias of shape [", weight.size(0),
                "], got ", shape_str(bias.sizes()));
    out = out + bias;
  }
  return out;
}

}  // namespace ember
