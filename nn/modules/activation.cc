// The activation and dropout modules' non-inline parts.
#include "nn/modules/activation.h"

#include <sstream>

#include "autograd/functional.h"

namespace ember::nn {

std::string LeakyReLUImpl::extra_repr() const {
  std::ostringstream s;
  s << "negative_slope=" << negative_slope;
  return s.str();
}

GELUImpl::GELUImpl(std::string approximate_in) : Cloneable("GELU"), approximate(std::move(approximate_in)) {
  EMBER_CHECK(approximate == "none" || approximate == "tanh", "GELU: approximate must be 'none' or 'tanh', got '",
              approximate, "'");
}

Tensor SoftmaxImpl::forward(const Tensor& input) { return softmax(input, dim); }

DropoutImpl::DropoutImpl(double p_in) : Cloneable("Dropout"), p(p_in) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "Dropout: probability has to be between 0 and 1, but got ", p);
}

Tensor DropoutImpl::forward(const Tensor& input) { return dropout(input, p, is_training(), generator); }

std::string DropoutImpl::extra_repr() const {
  std::ostringstream s;
  s << "p=" << p << ", inplace=False";
  return s.str();
}

}  // namespace ember::nn
