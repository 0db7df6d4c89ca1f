// linear: y = x Wᵀ + b over the last dim of x, composed of matmul and add (their gradients apply).
#include "autograd/functional.h"
#include "core/autocast.h"
#include "core/device_check.h"
#include "core/ops.h"

namespace ember {

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  if (autocast::Scope cast{autocast::Op::linear, {&input, &weight, &bias}}) return linear(cast[0], cast[1], cast[2]);
  common_device("linear", {{input, "input"}, {weight, "weight"}, {bias, "bias"}});
  EMBER_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out_features, in_features], got ",
              shape_str(weight.sizes()));
  EMBER_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(1), "linear: input's last dim (",
              input.dim() >= 1 ? input.size(-1) : 0, ") must match in_features of weight ", shape_str(weight.sizes()),
              "; input shape ", shape_str(input.sizes()));
  EMBER_CHECK(input.dtype() == weight.dtype() && is_floating(input.dtype()),
              "linear: expected input and weight of the same floating dtype, got ", dtype_name(input.dtype()), " and ",
              dtype_name(weight.dtype()));
  if (bias.defined()) {
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: expected bias of shape [", weight.size(0),
                "], got ", shape_str(bias.sizes()));
    EMBER_CHECK(bias.dtype() == weight.dtype(), "linear: expected bias of dtype ", dtype_name(weight.dtype()), ", got ",
                dtype_name(bias.dtype()));
  }
  Tensor out = matmul(input, weight.t());
  return bias.defined() ? out + bias : out;
}

}  // namespace ember
