// MaxPool2d, AvgPool2d and AdaptiveAvgPool2d modules.
#pragma once

#include <optional>

#include "autograd/functional.h"
#include "nn/module.h"
#include "nn/options.h"

namespace ember::nn {

struct MaxPool2dOptions {
  MaxPool2dOptions(Size2 kernel_size) : kernel_size_(kernel_size) {}  // NOLINT
  EMBER_ARG(Size2, kernel_size);
  EMBER_ARG(std::optional<Size2>, stride) = std::nullopt;  // default: kernel_size
  EMBER_ARG(Size2, padding) = 0;
  EMBER_ARG(Size2, dilation) = 1;
  EMBER_ARG(bool, ceil_mode) = false;
};

class MaxPool2dImpl : public Cloneable<MaxPool2dImpl> {
 public:
  explicit MaxPool2dImpl(const MaxPool2dOptions& options) : Cloneable("MaxPool2d"), options(options) {}
  // MaxPool2d(2), MaxPool2d(Size2(3, 2)): int -> Size2 -> options is two implicit conversions.
  explicit MaxPool2dImpl(Size2 kernel_size) : MaxPool2dImpl(MaxPool2dOptions(kernel_size)) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  MaxPool2dOptions options;
};
EMBER_MODULE(MaxPool2d);

struct AvgPool2dOptions {
  AvgPool2dOptions(Size2 kernel_size) : kernel_size_(kernel_size) {}  // NOLINT
  EMBER_ARG(Size2, kernel_size);
  EMBER_ARG(std::optional<Size2>, stride) = std::nullopt;
  EMBER_ARG(Size2, padding) = 0;
  EMBER_ARG(bool, ceil_mode) = false;
  EMBER_ARG(bool, count_include_pad) = true;
};

class AvgPool2dImpl : public Cloneable<AvgPool2dImpl> {
 public:
  explicit AvgPool2dImpl(const AvgPool2dOptions& options) : Cloneable("AvgPool2d"), options(options) {}
  explicit AvgPool2dImpl(Size2 kernel_size) : AvgPool2dImpl(AvgPool2dOptions(kernel_size)) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  AvgPool2dOptions options;
};
EMBER_MODULE(AvgPool2d);

class AdaptiveAvgPool2dImpl : public Cloneable<AdaptiveAvgPool2dImpl> {
 public:
  explicit AdaptiveAvgPool2dImpl(Size2 output_size) : Cloneable("AdaptiveAvgPool2d"), output_size(output_size) {}
  void reset() override {}
  Tensor forward(const Tensor& input) override { return adaptive_avg_pool2d(input, output_size); }
  std::string extra_repr() const override;
  Size2 output_size;
};
EMBER_MODULE(AdaptiveAvgPool2d);

}  // namespace ember::nn
