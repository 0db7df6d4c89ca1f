// Activation functions as free functions (the elementwise kernels and their fused backward live
// in core), plus dropout and layer_norm, which are compositions of differentiable ops.
#include "autograd/functional.h"
#include "core/autocast.h"
#include "core/device_check.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember {

Tensor relu(const Tensor& x) { return x.relu(); }
Tensor leaky_relu(const Tensor& x, double negative_slope) { return x.leaky_relu(negative_slope); }
Tensor gelu(const Tensor& x, bool tanh_approximation) { return x.gelu(tanh_approximation); }
Tensor silu(const Tensor& x) { return x.silu(); }
Tensor sigmoid(const Tensor& x) { return x.sigmoid(); }
Tensor tanh(const Tensor& x) { return x.tanh(); }

Tensor dropout(const Tensor& input, double p, bool training, Generator* generator) {
  autocast::Hold as_one_op;  // one kernel in PyTorch: its multiply is not autocast's to cast
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability has to be between 0 and 1, but got ", p);
  EMBER_CHECK(is_floating(input.dtype()), "dropout: expected a floating input, got ", dtype_name(input.dtype()));
  if (!training || p == 0.0) return input;
  if (p == 1.0) return input * zeros({}, input.options());
  Tensor keep;
  {
    NoGradGuard no_grad;
    keep = bernoulli(input.sizes(), 1.0 - p, input.options(), generator) * (1.0 / (1.0 - p));
  }
  return input * keep;
}

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  if (autocast::Scope cast{autocast::Op::layer_norm, {&input, &weight, &bias}})
    return layer_norm(cast[0], normalized_shape, cast[1], cast[2], eps);
  autocast::Hold as_one_op;  // where autocast leaves it (the CPU), its reductions keep its dtype
  common_device("layer_norm", {{input, "input"}, {weight, "weight"}, {bias, "bias"}});
  EMBER_CHECK(is_floating(input.dtype()), "layer_norm: expected a floating input, got ", dtype_name(input.dtype()));
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  EMBER_CHECK(k >= 1 && input.dim() >= k, "layer_norm: normalized_shape ", shape_str(normalized_shape),
              " needs an input of at least ", k, " dims, got ", shape_str(input.sizes()));
  Shape tail(input.sizes().end() - k, input.sizes().end());
  EMBER_CHECK(tail == normalized_shape, "layer_norm: expected input with trailing shape ", shape_str(normalized_shape),
              ", got input of shape ", shape_str(input.sizes()));
  for (const Tensor* t : {&weight, &bias}) {
    if (!t->defined()) continue;
    EMBER_CHECK(t->sizes() == normalized_shape, "layer_norm: expected weight and bias of shape ",
                shape_str(normalized_shape), ", got ", shape_str(t->sizes()));
    EMBER_CHECK(is_floating(t->dtype()), "layer_norm: expected a floating weight and bias, got ",
                dtype_name(t->dtype()));
  }
  std::vector<int64_t> dims;
  for (int64_t d = input.dim() - k; d < input.dim(); ++d) dims.push_back(d);
  Tensor mean = input.mean(dims, true);
  Tensor centered = input - mean;
  Tensor var = (centered * centered).mean(dims, true);
  Tensor out = centered * (var + eps).rsqrt();
  if (weight.defined()) out = out * weight;
  if (bias.defined()) out = out + bias;
  return out;
}

}  // namespace ember
