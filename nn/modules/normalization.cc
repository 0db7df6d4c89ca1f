// LayerNorm: weight 1, bias 0, forward through ember::layer_norm.
#include "nn/modules/normalization.h"

#include <sstream>

#include "autograd/functional.h"
#include "core/factory.h"

namespace ember::nn {

LayerNormImpl::LayerNormImpl(const LayerNormOptions& options_in) : Cloneable("LayerNorm"), options(options_in) {
  EMBER_CHECK(!options.normalized_shape().empty(), "LayerNorm: normalized_shape must not be empty");
  reset();
}

void LayerNormImpl::reset() {
  if (!options.elementwise_affine()) return;
  weight = register_parameter("weight", ones(options.normalized_shape()));
  bias = register_parameter("bias", zeros(options.normalized_shape()));
}

Tensor LayerNormImpl::forward(const Tensor& input) {
  // layer_norm's own error would name only the multiplication inside it.
  check_input_device(type_name(), input, weight);
  return layer_norm(input, options.normalized_shape(), weight, bias, options.eps());
}

std::string LayerNormImpl::extra_repr() const {
  std::ostringstream s;
  // A Python tuple: "(4, 5)", and "(6,)" for one dim.
  const Shape& shape = options.normalized_shape();
  s << "(";
  for (size_t i = 0; i < shape.size(); ++i) s << (i > 0 ? ", " : "") << shape[i];
  s << (shape.size() == 1 ? ",)" : ")") << ", eps=" << options.eps()
    << ", elementwise_affine=" << (options.elementwise_affine() ? "True" : "False");
  return s.str();
}

}  // namespace ember::nn
