// Pooling modules' forward and their PyTorch-style descriptions.
#include "nn/modules/pooling.h"

namespace ember::nn {

namespace {
std::string size_str(Size2 s) {
  return s.h == s.w ? std::to_string(s.h) : "(" + std::to_string(s.h) + ", " + std::to_string(s.w) + ")";
}
}  // namespace

Tensor MaxPool2dImpl::forward(const Tensor& input) {
  return max_pool2d(input, options.kernel_size(), options.stride(), options.padding(), options.dilation(),
                    options.ceil_mode());
}

std::string MaxPool2dImpl::extra_repr() const {
  return "kernel_size=" + size_str(options.kernel_size()) +
         ", stride=" + size_str(options.stride().value_or(options.kernel_size())) +
         ", padding=" + size_str(options.padding()) + ", dilation=" + size_str(options.dilation()) +
         ", ceil_mode=" + (options.ceil_mode() ? "True" : "False");
}

Tensor AvgPool2dImpl::forward(const Tensor& input) {
  return avg_pool2d(input, options.kernel_size(), options.stride(), options.padding(), options.ceil_mode(),
                    options.count_include_pad());
}

std::string AvgPool2dImpl::extra_repr() const {
  return "kernel_size=" + size_str(options.kernel_size()) +
         ", stride=" + size_str(options.stride().value_or(options.kernel_size())) +
         ", padding=" + size_str(options.padding());
}

std::string AdaptiveAvgPool2dImpl::extra_repr() const { return "output_size=" + size_str(output_size); }

}  // namespace ember::nn
