// Small networks: a fast ResNet-9 in the Myrtle / airbench style, an MLP and LeNet-5. All take
// the input's channel count (and MLP/LeNet the image size, which fixes their first linear layer)
// at construction; forward names the model and both shapes when the input does not fit.
#pragma once

#include <vector>

#include "nn/nn.h"

namespace ember::models {

// conv-BN-ReLU unit used by ResNet-9.
class ConvBnImpl : public nn::Cloneable<ConvBnImpl> {
 public:
  ConvBnImpl(int64_t in, int64_t out, bool pool);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  int64_t in, out;
  bool pool;
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
};
EMBER_MODULE(ConvBn);

// prep(64) → layer1(128, pool, +residual) → layer2(256, pool) → layer3(512, pool, +residual)
// → global max-pool → linear (no bias), logits scaled by 1/8 as in Page's DAWNBench entry.
class ResNet9Impl : public nn::Cloneable<ResNet9Impl> {
 public:
  ResNet9Impl(int64_t in_channels, int64_t num_classes, std::vector<int64_t> widths = {64, 128, 256, 512});
  void reset() override;
  Tensor forward(const Tensor& x) override;
  int64_t in_channels, num_classes;
  std::vector<int64_t> widths;
  ConvBn prep{nullptr}, layer1{nullptr}, layer2{nullptr}, layer3{nullptr};
  nn::Sequential res1{nullptr}, res3{nullptr};
  nn::Linear fc{nullptr};
};
EMBER_MODULE(ResNet9);

class MLPImpl : public nn::Cloneable<MLPImpl> {
 public:
  MLPImpl(int64_t in_features, std::vector<int64_t> hidden, int64_t num_classes);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  int64_t in_features;
  std::vector<int64_t> hidden;
  int64_t num_classes;
  nn::Sequential layers{nullptr};
};
EMBER_MODULE(MLP);

// LeNet-5 (conv 6@5x5, pool, conv 16@5x5, pool, 120, 84, classes) with ReLU and max-pool, for
// images of image_height x image_width (square: image_size).
class LeNetImpl : public nn::Cloneable<LeNetImpl> {
 public:
  LeNetImpl(int64_t in_channels, int64_t image_size, int64_t num_classes)
      : LeNetImpl(in_channels, image_size, image_size, num_classes) {}
  LeNetImpl(int64_t in_channels, int64_t image_height, int64_t image_width, int64_t num_classes);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  int64_t in_channels, image_height, image_width, num_classes;
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
EMBER_MODULE(LeNet);

}  // namespace ember::models
