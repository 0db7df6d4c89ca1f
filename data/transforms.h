// The image transforms: ToFloat, Normalize, RandomCrop, RandomHorizontalFlip, Cutout. Images are
// [C, H, W]. Each one is a loop over raw uint8/float buffers (memcpy/memset per row where it
// can), with no per-pixel virtual call. Each random transform documents what it draws from the
// example's ExampleRandom, in order, so tests and users can predict its choices.
#pragma once

#include <vector>

#include "data/transform.h"

namespace ember::data {

// uint8 -> float32 in [0, 1] (x / 255), like torchvision's ToTensor. float32 input is copied.
class ToFloat : public Transform {
 public:
  TensorSpec output_spec(const TensorSpec& input) const override;
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const override;
};

// float32 [C, H, W]: (x - mean[c]) / std[c]. mean and std hold C values, or one for every channel.
class Normalize : public Transform {
 public:
  Normalize(std::vector<float> mean, std::vector<float> std);
  TensorSpec output_spec(const TensorSpec& input) const override;
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const override;

 private:
  std::vector<float> mean_;
  std::vector<float> std_;
};

// Pads each side of [C, H, W] with `padding` zeros, then takes a [C, height, width] window.
// Draws: top = randint(0, H + 2 padding - height + 1), then left = randint(0, W + 2 padding - width + 1);
// output(c, y, x) = input(c, top + y - padding, left + x - padding), or 0 in the padding.
// Any dtype.
class RandomCrop : public Transform {
 public:
  RandomCrop(int64_t size, int64_t padding = 0) : RandomCrop(size, size, padding) {}
  RandomCrop(int64_t height, int64_t width, int64_t padding);
  TensorSpec output_spec(const TensorSpec& input) const override;
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const override;

 private:
  int64_t height_, width_, padding_;
};

// Mirrors [C, H, W] left-right. Draws: one uniform(); flips when it is < p. Any dtype.
class RandomHorizontalFlip : public Transform {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  TensorSpec output_spec(const TensorSpec& input) const override;
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const override;

 private:
  double p_;
};

// Cutout (DeVries & Taylor, 2017): zeroes a size x size square in every channel, centred at a
// random pixel and clipped to the image: rows [cy - size/2, cy - size/2 + size) and the same for
// columns. Draws: one uniform() (applied when < p), then cy = randint(0, H), cx = randint(0, W),
// always all three. Any dtype.
class Cutout : public Transform {
 public:
  explicit Cutout(int64_t size, double p = 1.0);
  TensorSpec output_spec(const TensorSpec& input) const override;
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const override;

 private:
  int64_t size_;
  double p_;
};

}  // namespace ember::data
