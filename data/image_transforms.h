// The resizing transforms of the ImageNet recipe and ColorJitter, after torchvision:
// RandomResizedCrop, Resize, CenterCrop, ColorJitter. Resizing is bilinear and, when shrinking,
// antialiased exactly as PIL's BILINEAR filter (the triangle stretched by the shrink factor, which
// is what torchvision applies to PIL images), computed in float and rounded once.
//
// On an encoded image (an ImageFolder example) RandomResizedCrop and Resize decode only what they
// need: the crop box, not the whole file, and for a JPEG at the smallest DCT scale (1/2, 1/4, 1/8)
// that still gives at least the output's pixels, then resample from that. roi_decode(false)
// decodes the whole image first instead (the reference the faster path is measured against).
// Inputs may also be decoded [C, H, W] images, uint8 or float32; the output has the input's dtype
// (uint8 for encoded images).
#pragma once

#include <cstdint>
#include <utility>

#include "data/transform.h"

namespace ember::data {

// A box in an image's pixels: rows [top, top + height), columns [left, left + width).
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox& other) const {
    return top == other.top && left == other.left && height == other.height && width == other.width;
  }
};

// torchvision's RandomResizedCrop: a box of a random area fraction in `scale` and a random aspect
// ratio (width / height) in `ratio`, log-uniform, resized to height x width.
// Draws (torchvision's get_params): up to 10 attempts of uniform() for the area fraction then
// uniform() for the log ratio; the first box that fits gets top = randint(0, H - h + 1) then
// left = randint(0, W - w + 1). When none fits, the centred box of the whole image clipped to
// `ratio` is used, with no more draws.
class RandomResizedCrop : public Transform {
 public:
  explicit RandomResizedCrop(int64_t size, std::pair<double, double> scale = {0.08, 1.0},
                             std::pair<double, double> ratio = {3.0 / 4.0, 4.0 / 3.0})
      : RandomResizedCrop(size, size, scale, ratio) {}
  RandomResizedCrop(int64_t height, int64_t width, std::pair<double, double> scale, std::pair<double, double> ratio);
  // Decode the whole image, then crop (true by default: decode only the box, reduced when it can).
  RandomResizedCrop& roi_decode(bool value) {
    roi_decode_ = value;
    return *this;
  }
  // The box for an image of height x width, drawing from `random` as documented above.
  CropBox box(int64_t image_height, int64_t image_width, ExampleRandom& random) const;

  TensorSpec output_spec(const TensorSpec& input) const override;
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const override;
  TensorSpec output_spec(const EncodedImage& image) const override;
  void apply(const EncodedImage& image, void* dst, ExampleRandom& random) const override;

 private:
  int64_t height_, width_;
  std::pair<double, double> scale_, ratio_;
  bool roi_decode_ = true;
};

// Resizes so that the shorter side is `size` (the longer keeps the aspect ratio, truncated as
// torchvision does), or to exactly height x width. No draws.
class Resize : public Transform {
 public:
  explicit Resize(int64_t size) : size_(size) {}
  Resize(int64_t height, int64_t width) : height_(height), width_(width) {}
  Resize& roi_decode(bool value) {
    roi_decode_ = value;
    return *this;
  }
  // The output size for an image of height x width.
  std::pair<int64_t, int64_t> output_size(int64_t image_height, int64_t image_width) const;

  TensorSpec output_spec(const TensorSpec& input) const override;
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const override;
  TensorSpec output_spec(const EncodedImage& image) const override;
  void apply(const EncodedImage& image, void* dst, ExampleRandom& random) const override;

 private:
  int64_t size_ = 0, height_ = 0, width_ = 0;
  bool roi_decode_ = true;
};

// The centred height x width window (torchvision's rounding: top = round((H - h) / 2)); an image
// smaller than the window is padded with zeros around it, as torchvision pads. Any dtype. No draws.
class CenterCrop : public Transform {
 public:
  explicit CenterCrop(int64_t size) : CenterCrop(size, size) {}
  CenterCrop(int64_t height, int64_t width);
  TensorSpec output_spec(const TensorSpec& input) const override;
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const override;

 private:
  int64_t height_, width_;
};

// torchvision's ColorJitter(brightness, contrast, saturation) on float32 [3, H, W] in [0, 1] (put
// it after ToFloat): each factor is uniform in [max(0, 1 - v), 1 + v] (v = 0 leaves it out), and
// the three are applied in a random order, each result clamped to [0, 1]:
// brightness x * f; contrast blend with the mean of the image's grayscale; saturation blend with
// the grayscale image (gray = 0.299 R + 0.587 G + 0.114 B, as torchvision's rgb_to_grayscale).
// Draws: the order (a shuffle of the three: randint(0, 3), then randint(0, 2)), then one uniform()
// per enabled factor, in the order brightness, contrast, saturation.
class ColorJitter : public Transform {
 public:
  ColorJitter(double brightness, double contrast, double saturation);
  TensorSpec output_spec(const TensorSpec& input) const override;
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const override;

 private:
  double brightness_, contrast_, saturation_;
};

}  // namespace ember::data
