// Conv2d's validation, PyTorch-default initialisation and forward.
#include "nn/modules/conv.h"

#include <cmath>

#include "core/factory.h"
#include "nn/init.h"

namespace ember::nn {

namespace {
std::string pair_str(Size2 s) { return "(" + std::to_string(s.h) + ", " + std::to_string(s.w) + ")"; }
}  // namespace

Conv2dImpl::Conv2dImpl(const Conv2dOptions& options_in) : Cloneable("Conv2d"), options(options_in) {
  EMBER_CHECK(options.in_channels() > 0 && options.out_channels() > 0 && options.groups() > 0,
              "Conv2d: channels and groups must be positive");
  EMBER_CHECK(options.in_channels() % options.groups() == 0 && options.out_channels() % options.groups() == 0,
              "Conv2d: in_channels (", options.in_channels(), ") and out_channels (", options.out_channels(),
              ") must be divisible by groups (", options.groups(), ")");
  reset();
}

void Conv2dImpl::reset() {
  const Size2 k = options.kernel_size();
  weight =
      register_parameter("weight", empty({options.out_channels(), options.in_channels() / options.groups(), k.h, k.w}));
  bias = options.bias() ? register_parameter("bias", empty({options.out_channels()})) : Tensor();
  reset_parameters();
}

void Conv2dImpl::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = 1.0 / std::sqrt(static_cast<double>(init::calculate_fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2dImpl::forward(const Tensor& input) {
  return conv2d(input, weight, bias, options.stride(), options.padding(), options.dilation(), options.groups());
}

std::string Conv2dImpl::extra_repr() const {
  std::string s = std::to_string(options.in_channels()) + ", " + std::to_string(options.out_channels()) +
                  ", kernel_size=" + pair_str(options.kernel_size()) + ", stride=" + pair_str(options.stride());
  if (options.padding().h != 0 || options.padding().w != 0) s += ", padding=" + pair_str(options.padding());
  if (options.dilation().h != 1 || options.dilation().w != 1) s += ", dilation=" + pair_str(options.dilation());
  if (options.groups() != 1) s += ", groups=" + std::to_string(options.groups());
  if (!options.bias()) s += ", bias=False";
  return s;
}

}  // namespace ember::nn
