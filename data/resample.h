// Bilinear resampling with PIL's antialiasing: when shrinking by a factor s, the triangle filter is
// stretched to s pixels on each side, so every source pixel counts (torchvision's Resize and
// RandomResizedCrop on PIL images, and `antialias=True` on tensors). Separable: a horizontal pass
// into float rows, then a vertical pass, rounded once at the end.
#pragma once

#include <cstdint>
#include <vector>

namespace ember::data {

// One axis: output i reads the inputs [first[i], first[i] + count[i]) with weights
// weights[i * taps + k], which sum to 1. Output i's centre is box_start + (i + 0.5) * box_size / out_size.
struct ResampleAxis {
  int64_t taps = 0;
  std::vector<int64_t> first, count;
  std::vector<float> weights;
};
ResampleAxis resample_axis(int64_t in_size, double box_start, double box_size, int64_t out_size);

// A source image whose element (c, y, x) is data[c * channel_stride + y * row_stride + x * pixel_stride]:
// interleaved rows (HWC) and planes (CHW) alike.
template <typename T>
struct ImageView {
  const T* data;
  int64_t channels, height, width;
  int64_t channel_stride, row_stride, pixel_stride;
};

// The box [x0, x0 + box_w) x [y0, y0 + box_h), in source pixels (fractions allowed), resampled to a
// contiguous [channels, out_h, out_w] planar output. uint8 outputs are rounded and clamped.
void resample_box(const ImageView<uint8_t>& src, double x0, double y0, double box_w, double box_h, int64_t out_h,
                  int64_t out_w, uint8_t* dst);
void resample_box(const ImageView<float>& src, double x0, double y0, double box_w, double box_h, int64_t out_h,
                  int64_t out_w, float* dst);

}  // namespace ember::data
