// Linear's initialisation and forward; Flatten's description.
#include "nn/modules/linear.h"

#include <cmath>

#include "autograd/functional.h"
#include "core/factory.h"
#include "nn/init.h"

namespace ember::nn {

LinearImpl::LinearImpl(const LinearOptions& options_in) : Cloneable("Linear"), options(options_in) {
  EMBER_CHECK(options.in_features() > 0 && options.out_features() > 0,
              "Linear: in_features and out_features must be "
              "positive, got ",
              options.in_features(), " and ", options.out_features());
  reset();
}

void LinearImpl::reset() {
  weight = register_parameter("weight", empty({options.out_features(), options.in_features()}));
  bias = options.bias() ? register_parameter("bias", empty({options.out_features()})) : Tensor();
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  // kaiming_uniform_(a = sqrt(5)) gives bound 1/sqrt(fan_in), as does the bias rule.
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features()));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor LinearImpl::forward(const Tensor& input) {
  // matmul's own check would name two devices but not which is the input.
  check_input_device(type_name(), input, weight);
  return linear(input, weight, bias);
}

std::string LinearImpl::extra_repr() const {
  return "in_features=" + std::to_string(options.in_features()) +
         ", out_features=" + std::to_string(options.out_features()) + ", bias=" + (options.bias() ? "True" : "False");
}

std::string FlattenImpl::extra_repr() const {
  return "start_dim=" + std::to_string(options.start_dim()) + ", end_dim=" + std::to_string(options.end_dim());
}

}  // namespace ember::nn
