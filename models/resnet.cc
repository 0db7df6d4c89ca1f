// ResNet blocks and the network. Convolutions carry no bias (a BN follows each); weights use
// Kaiming-normal (fan_out, ReLU) and BN starts at (1, 0), as torchvision initialises them.
#include "models/resnet.h"

#include "core/factory.h"
#include "core/ops.h"

namespace ember::models {

namespace {

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

nn::Conv2d conv1x1(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false));
}

// Option-A shortcut: every other pixel, channels zero-padded equally on both sides. The padding
// takes x's layout, so that a channels-last network's shortcut stays channels-last (cat keeps it).
Tensor shortcut_a(const Tensor& x, int64_t out_channels, int64_t stride) {
  Tensor sub = stride > 1 ? x.slice(2, 0, x.size(2), stride).slice(3, 0, x.size(3), stride) : x;
  int64_t extra = out_channels - x.size(1);
  if (extra == 0) return sub;
  auto padding = [&](int64_t channels) {
    Shape shape = sub.sizes();
    shape[1] = channels;
    return channels_last_order(x) ? empty_channels_last(shape, sub.options()).zero_() : zeros(shape, sub.options());
  };
  return cat({padding(extra / 2), sub, padding(extra - extra / 2)}, 1);
}

nn::Sequential projection(int64_t in, int64_t out, int64_t stride) {
  return nn::Sequential(conv1x1(in, out, stride), nn::BatchNorm2d(out));
}

}  // namespace

BasicBlockImpl::BasicBlockImpl(int64_t in_planes_in, int64_t planes_in, int64_t stride_in, Shortcut shortcut_in)
    : Cloneable("BasicBlock"), in_planes(in_planes_in), planes(planes_in), stride(stride_in), shortcut(shortcut_in) {
  reset();
}

void BasicBlockImpl::reset() {
  conv1 = register_module("conv1", conv3x3(in_planes, planes, stride));
  bn1 = register_module("bn1", nn::BatchNorm2d(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes, 1));
  bn2 = register_module("bn2", nn::BatchNorm2d(planes));
  downsample = nullptr;
  if ((stride != 1 || in_planes != planes) && shortcut == Shortcut::B)
    downsample = register_module("downsample", projection(in_planes, planes, stride));
}

Tensor BasicBlockImpl::forward(const Tensor& x) {
  Tensor out = bn1->forward_relu(conv1(x));
  out = bn2(conv2(out));
  Tensor identity = x;
  if (downsample)
    identity = downsample(x);
  else if (stride != 1 || in_planes != planes)
    identity = shortcut_a(x, planes, stride);
  return add_relu(out, identity);
}

BottleneckImpl::BottleneckImpl(int64_t in_planes_in, int64_t planes_in, int64_t stride_in, Shortcut shortcut_in)
    : Cloneable("Bottleneck"), in_planes(in_planes_in), planes(planes_in), stride(stride_in), shortcut(shortcut_in) {
  reset();
}

void BottleneckImpl::reset() {
  const int64_t out = planes * kExpansion;
  conv1 = register_module("conv1", conv1x1(in_planes, planes, 1));
  bn1 = register_module("bn1", nn::BatchNorm2d(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes, stride));
  bn2 = register_module("bn2", nn::BatchNorm2d(planes));
  conv3 = register_module("conv3", conv1x1(planes, out, 1));
  bn3 = register_module("bn3", nn::BatchNorm2d(out));
  downsample = nullptr;
  if ((stride != 1 || in_planes != out) && shortcut == Shortcut::B)
    downsample = register_module("downsample", projection(in_planes, out, stride));
}

Tensor BottleneckImpl::forward(const Tensor& x) {
  Tensor out = bn1->forward_relu(conv1(x));
  out = bn2->forward_relu(conv2(out));
  out = bn3(conv3(out));
  Tensor identity = x;
  if (downsample)
    identity = downsample(x);
  else if (stride != 1 || in_planes != planes * kExpansion)
    identity = shortcut_a(x, planes * kExpansion, stride);
  return add_relu(out, identity);
}

ResNetImpl::ResNetImpl(const ResNetConfig& config_in) : Cloneable(config_in.name), config(config_in) {
  EMBER_CHECK(!config.blocks.empty() && config.blocks.size() == config.widths.size(), "ResNet: expected as many ",
              "stage widths as block counts, got ", config.widths.size(), " and ", config.blocks.size());
  EMBER_CHECK(config.in_channels > 0 && config.num_classes > 0, "ResNet: in_channels and num_classes must be positive");
  reset();
}

void ResNetImpl::reset() {
  if (config.stem == Stem::ImageNet) {
    conv1 = register_module(
        "conv1",
        nn::Conv2d(nn::Conv2dOptions(config.in_channels, config.stem_width, 7).stride(2).padding(3).bias(false)));
  } else {
    conv1 = register_module("conv1", conv3x3(config.in_channels, config.stem_width, 1));
  }
  bn1 = register_module("bn1", nn::BatchNorm2d(config.stem_width));
  layers.clear();
  int64_t in_planes = config.stem_width;
  const int64_t expansion = config.bottleneck ? BottleneckImpl::kExpansion : BasicBlockImpl::kExpansion;
  for (size_t stage = 0; stage < config.blocks.size(); ++stage) {
    nn::Sequential layer;
    for (int64_t b = 0; b < config.blocks[stage]; ++b) {
      int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      if (config.bottleneck)
        layer->push_back(Bottleneck(in_planes, config.widths[stage], stride, config.shortcut));
      else
        layer->push_back(BasicBlock(in_planes, config.widths[stage], stride, config.shortcut));
      in_planes = config.widths[stage] * expansion;
    }
    layers.push_back(register_module("layer" + std::to_string(stage + 1), layer));
  }
  fc = register_module("fc", nn::Linear(in_planes, config.num_classes));

  // apply(), not modules(): reset() runs inside the constructor, before any shared_ptr owns us.
  apply([&](nn::Module& m) {
    if (auto* conv = dynamic_cast<nn::Conv2dImpl*>(&m))
      nn::init::kaiming_normal_(conv->weight, 0.0, nn::init::FanMode::FanOut, nn::init::Nonlinearity::ReLU);
    if (!config.zero_init_residual) return;
    if (auto* block = dynamic_cast<BasicBlockImpl*>(&m)) nn::init::zeros_(block->bn2->weight);
    if (auto* block = dynamic_cast<BottleneckImpl*>(&m)) nn::init::zeros_(block->bn3->weight);
  });
}

Tensor ResNetImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == config.in_channels, config.name, ": expected input [N, ", config.in_channels,
              ", H, W], got ", shape_str(x.sizes()));
  Tensor h = bn1->forward_relu(conv1(x));
  if (config.stem == Stem::ImageNet) h = max_pool2d(h, 3, Size2(2), 1);
  for (auto& layer : layers) h = layer(h);
  h = adaptive_avg_pool2d(h, 1).flatten(1);
  return fc(h);
}

ResNet cifar_resnet(int64_t depth, int64_t in_channels, int64_t num_classes, Shortcut shortcut) {
  EMBER_CHECK(depth >= 8 && (depth - 2) % 6 == 0, "cifar_resnet: depth must be 6n+2 (20, 32, 44, 56, 110), got ",
              depth);
  ResNetConfig c;
  int64_t n = (depth - 2) / 6;
  c.blocks = {n, n, n};
  c.widths = {16, 32, 64};
  c.stem_width = 16;
  c.stem = Stem::Cifar;
  c.shortcut = shortcut;
  c.in_channels = in_channels;
  c.num_classes = num_classes;
  c.name = "ResNet" + std::to_string(depth);
  return ResNet(c);
}

namespace {
ResNet imagenet_style(const char* name, bool bottleneck, std::vector<int64_t> blocks, int64_t in_channels,
                      int64_t num_classes, Stem stem) {
  ResNetConfig c;
  c.bottleneck = bottleneck;
  c.blocks = std::move(blocks);
  c.widths = {64, 128, 256, 512};
  c.stem_width = 64;
  c.stem = stem;
  c.shortcut = Shortcut::B;
  c.in_channels = in_channels;
  c.num_classes = num_classes;
  c.name = name;
  return ResNet(c);
}
}  // namespace

ResNet resnet18(int64_t in_channels, int64_t num_classes, Stem stem) {
  return imagenet_style("ResNet18", false, {2, 2, 2, 2}, in_channels, num_classes, stem);
}
ResNet resnet34(int64_t in_channels, int64_t num_classes, Stem stem) {
  return imagenet_style("ResNet34", false, {3, 4, 6, 3}, in_channels, num_classes, stem);
}
ResNet resnet50(int64_t in_channels, int64_t num_classes, Stem stem) {
  return imagenet_style("ResNet50", true, {3, 4, 6, 3}, in_channels, num_classes, stem);
}

}  // namespace ember::models
