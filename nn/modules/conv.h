// Conv2d over NCHW input: weight [out, in / groups, kh, kw], optional bias [out].
#pragma once

#include "autograd/functional.h"
#include "nn/module.h"
#include "nn/options.h"

namespace ember::nn {

struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, Size2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  EMBER_ARG(int64_t, in_channels);
  EMBER_ARG(int64_t, out_channels);
  EMBER_ARG(Size2, kernel_size);
  EMBER_ARG(Size2, stride) = 1;
  EMBER_ARG(Size2, padding) = 0;
  EMBER_ARG(Size2, dilation) = 1;
  EMBER_ARG(int64_t, groups) = 1;
  EMBER_ARG(bool, bias) = true;
};

class Conv2dImpl : public Cloneable<Conv2dImpl> {
 public:
  Conv2dImpl(int64_t in_channels, int64_t out_channels, Size2 kernel_size)
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv2dImpl(const Conv2dOptions& options);
  void reset() override;
  void reset_parameters();
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  Conv2dOptions options;
  Tensor weight, bias;
};
EMBER_MODULE(Conv2d);

}  // namespace ember::nn
