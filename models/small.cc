// ResNet-9, MLP and LeNet.
#include "models/small.h"

namespace ember::models {

ConvBnImpl::ConvBnImpl(int64_t in_in, int64_t out_in, bool pool_in)
    : Cloneable("ConvBn"), in(in_in), out(out_in), pool(pool_in) {
  reset();
}

void ConvBnImpl::reset() {
  conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(in, out, 3).padding(1).bias(false)));
  bn = register_module("bn", nn::BatchNorm2d(out));
}

Tensor ConvBnImpl::forward(const Tensor& x) {
  Tensor h = conv(x);
  if (pool) h = max_pool2d(h, 2);
  return bn->forward_relu(h);
}

ResNet9Impl::ResNet9Impl(int64_t in_channels_in, int64_t num_classes_in, std::vector<int64_t> widths_in)
    : Cloneable("ResNet9"), in_channels(in_channels_in), num_classes(num_classes_in), widths(std::move(widths_in)) {
  EMBER_CHECK(widths.size() == 4, "ResNet9: expected 4 widths, got ", widths.size());
  reset();
}

void ResNet9Impl::reset() {
  prep = register_module("prep", ConvBn(in_channels, widths[0], false));
  layer1 = register_module("layer1", ConvBn(widths[0], widths[1], true));
  res1 =
      register_module("res1", nn::Sequential(ConvBn(widths[1], widths[1], false), ConvBn(widths[1], widths[1], false)));
  layer2 = register_module("layer2", ConvBn(widths[1], widths[2], true));
  layer3 = register_module("layer3", ConvBn(widths[2], widths[3], true));
  res3 =
      register_module("res3", nn::Sequential(ConvBn(widths[3], widths[3], false), ConvBn(widths[3], widths[3], false)));
  fc = register_module("fc", nn::Linear(nn::LinearOptions(widths[3], num_classes).bias(false)));
}

Tensor ResNet9Impl::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == in_channels, "ResNet9: expected input [N, ", in_channels, ", H, W], got ",
              shape_str(x.sizes()));
  Tensor h = prep(x);
  h = layer1(h);
  h = h + res1(h);
  h = layer2(h);
  h = layer3(h);
  h = h + res3(h);
  h = h.amax({2, 3});
  return fc(h) * 0.125;
}

MLPImpl::MLPImpl(int64_t in_features_in, std::vector<int64_t> hidden_in, int64_t num_classes_in)
    : Cloneable("MLP"), in_features(in_features_in), hidden(std::move(hidden_in)), num_classes(num_classes_in) {
  reset();
}

void MLPImpl::reset() {
  nn::Sequential seq{nn::Flatten()};
  int64_t width = in_features;
  for (int64_t h : hidden) {
    seq->push_back(nn::Linear(width, h));
    seq->push_back(nn::ReLU());
    width = h;
  }
  seq->push_back(nn::Linear(width, num_classes));
  layers = register_module("layers", seq);
}

Tensor MLPImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() >= 2 && x.numel() == x.size(0) * in_features, "MLP: expected input [N, ...] of ", in_features,
              " features per example, got ", shape_str(x.sizes()));
  return layers(x);
}

LeNetImpl::LeNetImpl(int64_t in_channels_in, int64_t image_height_in, int64_t image_width_in, int64_t num_classes_in)
    : Cloneable("LeNet"),
      in_channels(in_channels_in),
      image_height(image_height_in),
      image_width(image_width_in),
      num_classes(num_classes_in) {
  EMBER_CHECK(image_height >= 16 && image_width >= 16, "LeNet: images must be at least 16x16 pixels, got ",
              image_height, "x", image_width);
  reset();
}

void LeNetImpl::reset() {
  conv1 = register_module("conv1", nn::Conv2d(in_channels, 6, 5));
  conv2 = register_module("conv2", nn::Conv2d(6, 16, 5));
  const int64_t height = ((image_height - 4) / 2 - 4) / 2, width = ((image_width - 4) / 2 - 4) / 2;
  fc1 = register_module("fc1", nn::Linear(16 * height * width, 120));
  fc2 = register_module("fc2", nn::Linear(120, 84));
  fc3 = register_module("fc3", nn::Linear(84, num_classes));
}

Tensor LeNetImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 4 && x.size(1) == in_channels && x.size(2) == image_height && x.size(3) == image_width,
              "LeNet: expected input [N, ", in_channels, ", ", image_height, ", ", image_width, "], got ",
              shape_str(x.sizes()));
  Tensor h = max_pool2d(conv1(x).relu(), 2);
  h = max_pool2d(conv2(h).relu(), 2).flatten(1);
  return fc3(fc2(fc1(h).relu()).relu());
}

}  // namespace ember::models
