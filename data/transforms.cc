// The image transforms' loops. Geometry-only transforms (crop, flip, cutout) move whole elements
// by size, so one code path serves every dtype; zero bytes are a zero of every dtype.
#include "data/transforms.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace ember::data {

namespace {

struct ImageDims {
  int64_t channels, height, width;
};

ImageDims image_dims(const char* op, const TensorSpec& input) {
  EMBER_CHECK(input.shape.size() == 3, op, ": expected an image [C, H, W], got shape ", shape_str(input.shape));
  return {input.shape[0], input.shape[1], input.shape[2]};
}

template <typename Element>
void reverse_rows(const Element* src, Element* dst, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    const Element* __restrict in = src + r * width;
    Element* __restrict out = dst + r * width;
    for (int64_t x = 0; x < width; ++x) out[x] = in[width - 1 - x];
  }
}

}  // namespace

TensorSpec ToFloat::output_spec(const TensorSpec& input) const {
  EMBER_CHECK(input.dtype == kUInt8 || input.dtype == kFloat32, "ToFloat: expected uint8 or float32 input, got ",
              dtype_name(input.dtype));
  return {input.shape, kFloat32};
}

void ToFloat::apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom&) const {
  int64_t n = input.numel();
  if (input.dtype == kFloat32) {
    std::memcpy(dst, src, input.nbytes());
    return;
  }
  EMBER_CHECK(input.dtype == kUInt8, "ToFloat: expected uint8 or float32 input, got ", dtype_name(input.dtype));
  const uint8_t* __restrict in = static_cast<const uint8_t*>(src);
  float* __restrict out = static_cast<float*>(dst);
  // Division rather than a reciprocal multiply: bit-identical to torchvision's x.float() / 255.
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]) / 255.0f;
}

Normalize::Normalize(std::vector<float> mean, std::vector<float> std) : mean_(std::move(mean)), std_(std::move(std)) {
  EMBER_CHECK(!mean_.empty() && mean_.size() == std_.size(),
              "Normalize: mean and std must be non-empty and of the same length, got ", mean_.size(), " and ",
              std_.size());
  for (size_t c = 0; c < std_.size(); ++c) {
    EMBER_CHECK(std_[c] > 0.0f, "Normalize: std[", c, "] must be > 0, got ", std_[c]);
  }
}

namespace {

// Normalize's checks, shared by output_spec and apply so apply never reads past mean_ and std_.
ImageDims check_normalize_input(const TensorSpec& input, size_t stats) {
  ImageDims dims = image_dims("Normalize", input);
  EMBER_CHECK(input.dtype == kFloat32, "Normalize: expected float32 input (put ToFloat before it), got ",
              dtype_name(input.dtype));
  EMBER_CHECK(stats == 1 || static_cast<int64_t>(stats) == dims.channels, "Normalize: got ", stats,
              " means and stds for an image of ", dims.channels, " channels ", shape_str(input.shape));
  return dims;
}

}  // namespace

TensorSpec Normalize::output_spec(const TensorSpec& input) const {
  check_normalize_input(input, mean_.size());
  return input;
}

void Normalize::apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom&) const {
  ImageDims dims = check_normalize_input(input, mean_.size());
  int64_t plane = dims.height * dims.width;
  const float* in = static_cast<const float*>(src);
  float* out = static_cast<float*>(dst);
  for (int64_t c = 0; c < dims.channels; ++c) {
    size_t k = mean_.size() == 1 ? 0 : static_cast<size_t>(c);
    const float m = mean_[k], s = std_[k];
    const float* __restrict in_plane = in + c * plane;
    float* __restrict out_plane = out + c * plane;
    // Division, as torchvision's (x - mean) / std, so results match it exactly.
    for (int64_t i = 0; i < plane; ++i) out_plane[i] = (in_plane[i] - m) / s;
  }
}

RandomCrop::RandomCrop(int64_t height, int64_t width, int64_t padding)
    : height_(height), width_(width), padding_(padding) {
  EMBER_CHECK(height > 0 && width > 0 && padding >= 0, "RandomCrop: expected size > 0 and padding >= 0, got size ",
              height, "x", width, " and padding ", padding);
}

namespace {

ImageDims check_crop_input(const TensorSpec& input, int64_t height, int64_t width, int64_t padding) {
  ImageDims dims = image_dims("RandomCrop", input);
  EMBER_CHECK(dims.height + 2 * padding >= height && dims.width + 2 * padding >= width, "RandomCrop: a ", height, "x",
              width, " crop does not fit an image ", shape_str(input.shape), " padded by ", padding);
  return dims;
}

}  // namespace

TensorSpec RandomCrop::output_spec(const TensorSpec& input) const {
  ImageDims dims = check_crop_input(input, height_, width_, padding_);
  return {{dims.channels, height_, width_}, input.dtype};
}

void RandomCrop::apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const {
  ImageDims dims = check_crop_input(input, height_, width_, padding_);
  const int64_t p = padding_;
  const int64_t top = random.randint(0, dims.height + 2 * p - height_ + 1);
  const int64_t left = random.randint(0, dims.width + 2 * p - width_ + 1);
  const size_t element = element_size(input.dtype);
  // Output columns [x0, x1) come from input columns left + x - p; the rest lie in the padding.
  const int64_t x0 = std::min(std::max<int64_t>(0, p - left), width_);
  const int64_t x1 = std::max(x0, std::min(width_, dims.width + p - left));
  const uint8_t* in = static_cast<const uint8_t*>(src);
  uint8_t* out = static_cast<uint8_t*>(dst);
  const size_t in_row = static_cast<size_t>(dims.width) * element, out_row = static_cast<size_t>(width_) * element;
  for (int64_t c = 0; c < dims.channels; ++c) {
    for (int64_t y = 0; y < height_; ++y) {
      uint8_t* row = out + static_cast<size_t>(c * height_ + y) * out_row;
      int64_t sy = top + y - p;
      if (sy < 0 || sy >= dims.height) {
        std::memset(row, 0, out_row);
        continue;
      }
      const uint8_t* source = in + static_cast<size_t>(c * dims.height + sy) * in_row;
      std::memset(row, 0, static_cast<size_t>(x0) * element);
      std::memcpy(row + x0 * element, source + (left + x0 - p) * element, static_cast<size_t>(x1 - x0) * element);
      std::memset(row + x1 * element, 0, static_cast<size_t>(width_ - x1) * element);
    }
  }
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "RandomHorizontalFlip: p must be in [0, 1], got ", p);
}

TensorSpec RandomHorizontalFlip::output_spec(const TensorSpec& input) const {
  image_dims("RandomHorizontalFlip", input);
  return input;
}

void RandomHorizontalFlip::apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const {
  ImageDims dims = image_dims("RandomHorizontalFlip", input);
  if (!(random.uniform() < p_)) {
    std::memcpy(dst, src, input.nbytes());
    return;
  }
  int64_t rows = dims.channels * dims.height;
  switch (element_size(input.dtype)) {
    case 1:
      reverse_rows(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), rows, dims.width);
      break;
    case 2:
      reverse_rows(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), rows, dims.width);
      break;
    case 4:
      reverse_rows(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), rows, dims.width);
      break;
    case 8:
      reverse_rows(static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), rows, dims.width);
      break;
    default:
      EMBER_FAIL("RandomHorizontalFlip: unsupported element size ", element_size(input.dtype));
  }
}

Cutout::Cutout(int64_t size, double p) : size_(size), p_(p) {
  EMBER_CHECK(size > 0 && p >= 0.0 && p <= 1.0, "Cutout: expected size > 0 and p in [0, 1], got size ", size, " and p ",
              p);
}

TensorSpec Cutout::output_spec(const TensorSpec& input) const {
  image_dims("Cutout", input);
  return input;
}

void Cutout::apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const {
  ImageDims dims = image_dims("Cutout", input);
  const bool active = random.uniform() < p_;
  const int64_t cy = random.randint(0, dims.height);
  const int64_t cx = random.randint(0, dims.width);
  std::memcpy(dst, src, input.nbytes());
  if (!active) return;
  const int64_t y0 = std::clamp<int64_t>(cy - size_ / 2, 0, dims.height);
  const int64_t y1 = std::clamp<int64_t>(cy - size_ / 2 + size_, 0, dims.height);
  const int64_t x0 = std::clamp<int64_t>(cx - size_ / 2, 0, dims.width);
  const int64_t x1 = std::clamp<int64_t>(cx - size_ / 2 + size_, 0, dims.width);
  const size_t element = element_size(input.dtype);
  uint8_t* out = static_cast<uint8_t*>(dst);
  for (int64_t c = 0; c < dims.channels; ++c) {
    for (int64_t y = y0; y < y1; ++y) {
      std::memset(out + static_cast<size_t>((c * dims.height + y) * dims.width + x0) * element, 0,
                  static_cast<size_t>(x1 - x0) * element);
    }
  }
}

}  // namespace ember::data
