// The ResNet family (He et al. 2016), for any input channel count and image size:
//  - CIFAR ResNets: ResNet-20/32/44/56/110, three stages of 16/32/64 channels, 3x3 stem, with
//    option-A (parameter-free, zero-padded) or option-B (1x1 conv + BN) shortcuts;
//  - ResNet-18/34 (BasicBlock) and ResNet-50 (Bottleneck), with a CIFAR stem (3x3, stride 1,
//    no max-pool) or the ImageNet stem (7x7 stride 2 + 3x3 max-pool).
// Parameter names follow torchvision: conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, fc.
//
//   auto net = ember::models::resnet20(/*in_channels=*/1, /*num_classes=*/10);
//   ember::Tensor logits = net->forward(images);   // [N, 1, 28, 28] -> [N, 10]
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/nn.h"

namespace ember::models {

enum class Shortcut { A, B };  // A: subsample + zero channels; B: 1x1 conv + BN projection
enum class Stem { Cifar, ImageNet };

struct ResNetConfig {
  bool bottleneck = false;
  std::vector<int64_t> blocks;  // blocks per stage
  std::vector<int64_t> widths;  // channels per stage (before bottleneck expansion)
  int64_t stem_width = 16;
  Stem stem = Stem::Cifar;
  Shortcut shortcut = Shortcut::B;
  int64_t in_channels = 3;
  int64_t num_classes = 10;
  bool zero_init_residual = false;  // last BN of each block starts at 0 (Goyal et al.)
  std::string name = "ResNet";
};

// conv3x3-BN-ReLU-conv3x3-BN + shortcut, ReLU.
class BasicBlockImpl : public nn::Cloneable<BasicBlockImpl> {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlockImpl(int64_t in_planes, int64_t planes, int64_t stride, Shortcut shortcut);
  void reset() override;
  Tensor forward(const Tensor& x) override;

  int64_t in_planes, planes, stride;
  Shortcut shortcut;
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::Sequential downsample{nullptr};  // empty: identity or option A
};
EMBER_MODULE(BasicBlock);

// 1x1 reduce, 3x3 (stride here, as torchvision v1.5), 1x1 expand x4 + shortcut, ReLU.
class BottleneckImpl : public nn::Cloneable<BottleneckImpl> {
 public:
  static constexpr int64_t kExpansion = 4;
  BottleneckImpl(int64_t in_planes, int64_t planes, int64_t stride, Shortcut shortcut);
  void reset() override;
  Tensor forward(const Tensor& x) override;

  int64_t in_planes, planes, stride;
  Shortcut shortcut;
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential downsample{nullptr};
};
EMBER_MODULE(Bottleneck);

class ResNetImpl : public nn::Cloneable<ResNetImpl> {
 public:
  explicit ResNetImpl(const ResNetConfig& config);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override { return ""; }

  ResNetConfig config;
  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  std::vector<nn::Sequential> layers;  // layer1, layer2, ...
  nn::Linear fc{nullptr};
};
EMBER_MODULE(ResNet);

// CIFAR ResNet of depth 6n+2 (20, 32, 44, 56, 110), stages of 16/32/64 channels.
ResNet cifar_resnet(int64_t depth, int64_t in_channels = 3, int64_t num_classes = 10, Shortcut shortcut = Shortcut::A);
inline ResNet resnet20(int64_t in_channels = 3, int64_t num_classes = 10, Shortcut shortcut = Shortcut::A) {
  return cifar_resnet(20, in_channels, num_classes, shortcut);
}
ResNet resnet18(int64_t in_channels = 3, int64_t num_classes = 1000, Stem stem = Stem::ImageNet);
ResNet resnet34(int64_t in_channels = 3, int64_t num_classes = 1000, Stem stem = Stem::ImageNet);
ResNet resnet50(int64_t in_channels = 3, int64_t num_classes = 1000, Stem stem = Stem::ImageNet);

}  // namespace ember::models
