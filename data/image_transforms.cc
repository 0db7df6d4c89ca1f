// RandomResizedCrop, Resize, CenterCrop and ColorJitter. The resizing ones share one path from a
// decoded image (interleaved, maybe reduced, maybe a region) to the planar output: the box is
// mapped into the decoded buffer's pixels and resampled from there (data/resample.h).
#include "data/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "data/resample.h"

namespace ember::data {

namespace {

struct Dims {
  int64_t channels, height, width;
};

Dims image_dims(const char* op, const TensorSpec& input, bool any_dtype = false) {
  EMBER_CHECK(input.shape.size() == 3, op, ": expected an image [C, H, W], got shape ", shape_str(input.shape));
  EMBER_CHECK(any_dtype || input.dtype == kUInt8 || input.dtype == kFloat32, op,
              ": expected a uint8 or float32 image, got ", dtype_name(input.dtype));
  EMBER_CHECK(input.shape[1] > 0 && input.shape[2] > 0, op, ": the image ", shape_str(input.shape), " is empty");
  return {input.shape[0], input.shape[1], input.shape[2]};
}

// A box in full-image pixels resampled from a planar [C, H, W] buffer of either dtype.
void resample_planar(const void* src, const TensorSpec& input, double left, double top, double width, double height,
                     int64_t out_h, int64_t out_w, void* dst) {
  const int64_t C = input.shape[0], H = input.shape[1], W = input.shape[2];
  if (input.dtype == kUInt8) {
    ImageView<uint8_t> view{static_cast<const uint8_t*>(src), C, H, W, H * W, W, 1};
    resample_box(view, left, top, width, height, out_h, out_w, static_cast<uint8_t*>(dst));
  } else {
    ImageView<float> view{static_cast<const float*>(src), C, H, W, H * W, W, 1};
    resample_box(view, left, top, width, height, out_h, out_w, static_cast<float*>(dst));
  }
}

// The box (full-image pixels) from a decoded buffer, which may start at (x0, y0) and be reduced by
// `scale`, to planar uint8.
void resample_decoded(const DecodedImage& image, const CropBox& box, int64_t out_h, int64_t out_w, void* dst) {
  const int64_t C = image.channels;
  ImageView<uint8_t> view{image.pixels.data(), C, image.height, image.width, 1, image.width * C, C};
  resample_box(view, (static_cast<double>(box.left) - image.x0) / image.scale,
               (static_cast<double>(box.top) - image.y0) / image.scale, static_cast<double>(box.width) / image.scale,
               static_cast<double>(box.height) / image.scale, out_h, out_w, static_cast<uint8_t*>(dst));
}

// Python's round(): halves to even, which torchvision's box arithmetic relies on.
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

RandomResizedCrop::RandomResizedCrop(int64_t height, int64_t width, std::pair<double, double> scale,
                                     std::pair<double, double> ratio)
    : height_(height), width_(width), scale_(scale), ratio_(ratio) {
  EMBER_CHECK(height > 0 && width > 0, "RandomResizedCrop: the output size must be positive, got ", height, "x", width);
  EMBER_CHECK(scale.first > 0 && scale.first <= scale.second && scale.second <= 1.0,
              "RandomResizedCrop: scale must satisfy 0 < low <= high <= 1, got (", scale.first, ", ", scale.second,
              ")");
  EMBER_CHECK(ratio.first > 0 && ratio.first <= ratio.second,
              "RandomResizedCrop: ratio must satisfy 0 < low <= high, got (", ratio.first, ", ", ratio.second, ")");
}

CropBox RandomResizedCrop::box(int64_t image_height, int64_t image_width, ExampleRandom& random) const {
  const double area = static_cast<double>(image_height) * static_cast<double>(image_width);
  const double log_lo = std::log(ratio_.first), log_hi = std::log(ratio_.second);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (scale_.first + (scale_.second - scale_.first) * random.uniform());
    const double aspect = std::exp(log_lo + (log_hi - log_lo) * random.uniform());
    const int64_t w = round_half_even(std::sqrt(target * aspect));
    const int64_t h = round_half_even(std::sqrt(target / aspect));
    if (w > 0 && w <= image_width && h > 0 && h <= image_height) {
      CropBox box;
      box.height = h, box.width = w;
      box.top = random.randint(0, image_height - h + 1);
      box.left = random.randint(0, image_width - w + 1);
      return box;
    }
  }
  // No fit in ten tries: the whole image, clipped to the ratio range, centred.
  const double in_ratio = static_cast<double>(image_width) / static_cast<double>(image_height);
  CropBox box;
  box.width = image_width, box.height = image_height;
  if (in_ratio < ratio_.first) {
    box.height = round_half_even(static_cast<double>(image_width) / ratio_.first);
  } else if (in_ratio > ratio_.second) {
    box.width = round_half_even(static_cast<double>(image_height) * ratio_.second);
  }
  box.height = std::clamp<int64_t>(box.height, 1, image_height);
  box.width = std::clamp<int64_t>(box.width, 1, image_width);
  box.top = (image_height - box.height) / 2;
  box.left = (image_width - box.width) / 2;
  return box;
}

TensorSpec RandomResizedCrop::output_spec(const TensorSpec& input) const {
  Dims d = image_dims("RandomResizedCrop", input);
  return {{d.channels, height_, width_}, input.dtype};
}

void RandomResizedCrop::apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const {
  Dims d = image_dims("RandomResizedCrop", input);
  CropBox b = box(d.height, d.width, random);
  resample_planar(src, input, static_cast<double>(b.left), static_cast<double>(b.top), static_cast<double>(b.width),
                  static_cast<double>(b.height), height_, width_, dst);
}

TensorSpec RandomResizedCrop::output_spec(const EncodedImage& image) const {
  return {{image.channels, height_, width_}, kUInt8};
}

void RandomResizedCrop::apply(const EncodedImage& image, void* dst, ExampleRandom& random) const {
  const CropBox b = box(image.header.height, image.header.width, random);
  DecodeRequest request;
  if (roi_decode_) {
    request.left = b.left, request.top = b.top, request.width = b.width, request.height = b.height;
    request.min_width = width_, request.min_height = height_;
  }
  resample_decoded(image.decode(request), b, height_, width_, dst);
}

std::pair<int64_t, int64_t> Resize::output_size(int64_t image_height, int64_t image_width) const {
  if (size_ == 0) return {height_, width_};
  const int64_t shorter = std::min(image_height, image_width), longer = std::max(image_height, image_width);
  if (shorter == size_) return {image_height, image_width};
  // torchvision truncates the longer side: int(size * long / short).
  const auto scaled =
      static_cast<int64_t>(static_cast<double>(size_) * static_cast<double>(longer) / static_cast<double>(shorter));
  return image_width <= image_height ? std::pair<int64_t, int64_t>{scaled, size_}
                                     : std::pair<int64_t, int64_t>{size_, scaled};
}

TensorSpec Resize::output_spec(const TensorSpec& input) const {
  EMBER_CHECK(size_ > 0 || (height_ > 0 && width_ > 0), "Resize: the size must be positive, got ",
              size_ ? size_ : height_, size_ ? "" : "x", size_ ? "" : std::to_string(width_));
  Dims d = image_dims("Resize", input);
  auto [h, w] = output_size(d.height, d.width);
  return {{d.channels, h, w}, input.dtype};
}

void Resize::apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom&) const {
  Dims d = image_dims("Resize", input);
  auto [h, w] = output_size(d.height, d.width);
  resample_planar(src, input, 0.0, 0.0, static_cast<double>(d.width), static_cast<double>(d.height), h, w, dst);
}

TensorSpec Resize::output_spec(const EncodedImage& image) const {
  return output_spec(TensorSpec{{image.channels, image.header.height, image.header.width}, kUInt8});
}

void Resize::apply(const EncodedImage& image, void* dst, ExampleRandom&) const {
  auto [h, w] = output_size(image.header.height, image.header.width);
  DecodeRequest request;
  if (roi_decode_) request.min_width = w, request.min_height = h;
  CropBox whole;
  whole.height = image.header.height, whole.width = image.header.width;
  resample_decoded(image.decode(request), whole, h, w, dst);
}

CenterCrop::CenterCrop(int64_t height, int64_t width) : height_(height), width_(width) {
  EMBER_CHECK(height > 0 && width > 0, "CenterCrop: the size must be positive, got ", height, "x", width);
}

TensorSpec CenterCrop::output_spec(const TensorSpec& input) const {
  Dims d = image_dims("CenterCrop", input, /*any_dtype=*/true);
  return {{d.channels, height_, width_}, input.dtype};
}

void CenterCrop::apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom&) const {
  Dims d = image_dims("CenterCrop", input, /*any_dtype=*/true);
  // Source row of output row 0: the centred offset, or minus the top padding when the image is
  // smaller (torchvision pads (h - H) / 2 above, the rest below).
  const int64_t oy = d.height >= height_ ? round_half_even((d.height - height_) / 2.0) : -((height_ - d.height) / 2);
  const int64_t ox = d.width >= width_ ? round_half_even((d.width - width_) / 2.0) : -((width_ - d.width) / 2);
  const size_t element = element_size(input.dtype);
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t x_lo = std::max<int64_t>(0, -ox), x_hi = std::min(width_, d.width - ox);
  for (int64_t c = 0; c < d.channels; ++c) {
    for (int64_t y = 0; y < height_; ++y) {
      uint8_t* row = out + ((c * height_ + y) * width_) * element;
      const int64_t sy = y + oy;
      if (sy < 0 || sy >= d.height || x_hi <= x_lo) {
        std::memset(row, 0, static_cast<size_t>(width_) * element);
        continue;
      }
      std::memset(row, 0, static_cast<size_t>(x_lo) * element);
      std::memcpy(row + x_lo * element, in + ((c * d.height + sy) * d.width + x_lo + ox) * element,
                  static_cast<size_t>(x_hi - x_lo) * element);
      std::memset(row + x_hi * element, 0, static_cast<size_t>(width_ - x_hi) * element);
    }
  }
}

ColorJitter::ColorJitter(double brightness, double contrast, double saturation)
    : brightness_(brightness), contrast_(contrast), saturation_(saturation) {
  EMBER_CHECK(brightness >= 0 && contrast >= 0 && saturation >= 0,
              "ColorJitter: brightness, contrast and saturation must be >= 0, got ", brightness, ", ", contrast, ", ",
              saturation);
}

TensorSpec ColorJitter::output_spec(const TensorSpec& input) const {
  Dims d = image_dims("ColorJitter", input);
  EMBER_CHECK(input.dtype == kFloat32, "ColorJitter: expected a float32 image in [0, 1] (put ToFloat before it), got ",
              dtype_name(input.dtype));
  EMBER_CHECK(d.channels == 1 || d.channels == 3, "ColorJitter: expected 1 or 3 channels, got ", d.channels);
  return input;
}

namespace {

// torchvision's rgb_to_grayscale weights.
void grayscale(const float* img, int64_t C, int64_t pixels, float* gray) {
  if (C == 1) {
    std::memcpy(gray, img, static_cast<size_t>(pixels) * sizeof(float));
    return;
  }
  const float *r = img, *g = img + pixels, *b = img + 2 * pixels;
  for (int64_t i = 0; i < pixels; ++i) gray[i] = 0.2989f * r[i] + 0.587f * g[i] + 0.114f * b[i];
}

// f * img + (1 - f) * other, clamped to [0, 1]; `other` has one plane, used for every channel.
void blend(float* img, int64_t C, int64_t pixels, float f, const float* other, float other_scalar) {
  for (int64_t c = 0; c < C; ++c) {
    float* __restrict p = img + c * pixels;
    for (int64_t i = 0; i < pixels; ++i) {
      float o = other ? other[i] : other_scalar;
      p[i] = std::clamp(f * p[i] + (1.0f - f) * o, 0.0f, 1.0f);
    }
  }
}

}  // namespace

void ColorJitter::apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const {
  output_spec(input);
  const int64_t C = input.shape[0], pixels = input.shape[1] * input.shape[2];
  float* img = static_cast<float*>(dst);
  std::memcpy(img, src, input.nbytes());
  int order[3] = {0, 1, 2};
  std::swap(order[0], order[random.randint(0, 3)]);
  std::swap(order[1], order[1 + random.randint(0, 2)]);
  auto factor = [&](double v) {
    if (v == 0) return 1.0f;
    const double lo = std::max(0.0, 1.0 - v), hi = 1.0 + v;
    return static_cast<float>(lo + (hi - lo) * random.uniform());
  };
  const float f[3] = {factor(brightness_), factor(contrast_), factor(saturation_)};
  std::vector<float> gray(static_cast<size_t>(pixels));
  for (int which : order) {
    if (which == 0 && brightness_ > 0) {
      blend(img, C, pixels, f[0], nullptr, 0.0f);
    } else if (which == 1 && contrast_ > 0) {
      grayscale(img, C, pixels, gray.data());
      double mean = 0.0;
      for (float g : gray) mean += g;
      blend(img, C, pixels, f[1], nullptr, static_cast<float>(mean / static_cast<double>(pixels)));
    } else if (which == 2 && saturation_ > 0 && C == 3) {
      grayscale(img, C, pixels, gray.data());
      blend(img, C, pixels, f[2], gray.data(), 0.0f);
    }
  }
}

}  // namespace ember::data
