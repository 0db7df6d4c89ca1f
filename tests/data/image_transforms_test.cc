// RandomResizedCrop, Resize, CenterCrop and ColorJitter against independent references: a float64
// resampler written from PIL's definition (every input pixel weighted by the stretched triangle,
// no windowing), torchvision's rules for boxes and sizes replayed with the same ExampleRandom, and
// the crop-aware decode of a JPEG against the whole decode followed by the reference resize.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/ember_core.h"
#include "data/image_transforms.h"
#include "data/transforms.h"
#include "tests/data/test_files.h"

using namespace ember;
using namespace ember::data;
using ember::data::testing::photo_pixels;

namespace {

// Output i's weights over all `in` inputs, for the box [start, start + size) resized to `out`, and
// the range [lo, hi) of inputs where they are not zero (kept only to make the reference fast).
struct ReferenceAxis {
  std::vector<std::vector<double>> w;
  std::vector<int64_t> lo, hi;
};

ReferenceAxis reference_weights(int64_t in, double start, double size, int64_t out) {
  const double scale = size / static_cast<double>(out), stretch = std::max(scale, 1.0);
  ReferenceAxis axis;
  axis.w.assign(static_cast<size_t>(out), std::vector<double>(static_cast<size_t>(in)));
  axis.lo.assign(static_cast<size_t>(out), in);
  axis.hi.assign(static_cast<size_t>(out), 0);
  for (int64_t i = 0; i < out; ++i) {
    const double center = start + (static_cast<double>(i) + 0.5) * scale;
    double total = 0;
    for (int64_t j = 0; j < in; ++j) {
      total += axis.w[i][j] = std::max(0.0, 1.0 - std::abs((j + 0.5 - center) / stretch));
      if (axis.w[i][j] > 0) axis.lo[i] = std::min(axis.lo[i], j), axis.hi[i] = j + 1;
    }
    for (double& v : axis.w[i]) v /= total;
  }
  return axis;
}

// [C, H, W] planes (double) resized from the box, in float64.
std::vector<double> reference_resize(const std::vector<double>& planes, int64_t C, int64_t H, int64_t W, double left,
                                     double top, double box_w, double box_h, int64_t out_h, int64_t out_w) {
  ReferenceAxis wy = reference_weights(H, top, box_h, out_h), wx = reference_weights(W, left, box_w, out_w);
  std::vector<double> mid(static_cast<size_t>(C * H * out_w)), out(static_cast<size_t>(C * out_h * out_w));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = 0; x < out_w; ++x) {
        double s = 0;
        for (int64_t k = wx.lo[x]; k < wx.hi[x]; ++k) s += wx.w[x][k] * planes[(c * H + y) * W + k];
        mid[(c * H + y) * out_w + x] = s;
      }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < out_h; ++y)
      for (int64_t x = 0; x < out_w; ++x) {
        double s = 0;
        for (int64_t j = wy.lo[y]; j < wy.hi[y]; ++j) s += wy.w[y][j] * mid[(c * H + j) * out_w + x];
        out[(c * out_h + y) * out_w + x] = s;
      }
  return out;
}

std::vector<double> as_doubles(const Tensor& t) {
  std::vector<float> f = t.to(kFloat32).contiguous().to_vector<float>();
  return std::vector<double>(f.begin(), f.end());
}

// Interleaved decoded pixels to [C, H, W] doubles.
std::vector<double> planar(const DecodedImage& image) {
  const int64_t C = image.channels, n = image.width * image.height;
  std::vector<double> out(static_cast<size_t>(C * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < C; ++c) out[c * n + i] = image.pixels[i * C + c];
  return out;
}

EncodedImage encoded_jpeg(int64_t W, int64_t H, uint64_t seed, int quality = 90) {
  EncodedImage image;
  std::vector<uint8_t> rgb = photo_pixels(W, H, 3, seed);
  image.name = "photo.jpg";
  image.bytes = encode_jpeg(rgb.data(), W, H, 3, quality);
  image.header = read_image_header(image.bytes.data(), image.bytes.size(), image.name);
  return image;
}

// torchvision's get_params, replayed with the transform's draws.
CropBox torchvision_box(int64_t H, int64_t W, std::pair<double, double> scale, std::pair<double, double> ratio,
                        ExampleRandom& random) {
  for (int k = 0; k < 10; ++k) {
    const double area = H * W * (scale.first + (scale.second - scale.first) * random.uniform());
    const double aspect =
        std::exp(std::log(ratio.first) + (std::log(ratio.second) - std::log(ratio.first)) * random.uniform());
    const int64_t w = std::llrint(std::sqrt(area * aspect)), h = std::llrint(std::sqrt(area / aspect));
    if (0 < w && w <= W && 0 < h && h <= H) {
      const int64_t top = random.randint(0, H - h + 1);
      return CropBox{top, random.randint(0, W - w + 1), h, w};
    }
  }
  const double in_ratio = static_cast<double>(W) / H;
  int64_t w = W, h = H;
  if (in_ratio < ratio.first) h = std::llrint(W / ratio.first);
  if (in_ratio > ratio.second) w = std::llrint(H * ratio.second);
  return CropBox{(H - h) / 2, (W - w) / 2, h, w};
}

}  // namespace

TEST_CASE("RandomResizedCrop draws torchvision's boxes", "[image_transforms]") {
  RandomResizedCrop crop(224);
  for (int64_t index = 0; index < 300; ++index) {
    const int64_t H = 50 + index % 400, W = 60 + (index * 7) % 500;
    ExampleRandom a(3, 1, index), b(3, 1, index);
    CropBox got = crop.box(H, W, a), want = torchvision_box(H, W, {0.08, 1.0}, {3.0 / 4, 4.0 / 3}, b);
    CAPTURE(index, H, W);
    REQUIRE(got == want);
    REQUIRE(got.top + got.height <= H);
    REQUIRE(got.left + got.width <= W);
    REQUIRE(a.next_u32() == b.next_u32());  // the same number of draws
  }
  // No box of ratio 10..20 fits a square: the centred, ratio-clipped whole image, with no more draws.
  RandomResizedCrop wide(8, 8, {0.5, 1.0}, {10.0, 20.0});
  ExampleRandom r(0, 0, 0);
  CHECK(wide.box(100, 100, r) == CropBox{45, 0, 10, 100});
  CHECK_THROWS_WITH(RandomResizedCrop(0), Catch::Contains("RandomResizedCrop: the output size must be positive"));
  CHECK_THROWS_WITH(RandomResizedCrop(8, 8, {0.5, 0.2}, {1, 1}), Catch::Contains("scale must satisfy"));
}

TEST_CASE("Resizing matches PIL's antialiased bilinear in float64, shrinking and enlarging", "[image_transforms]") {
  for (auto [C, H, W, out_h, out_w] : std::vector<std::array<int64_t, 5>>{
           {3, 37, 53, 11, 17}, {1, 20, 20, 45, 31}, {3, 64, 9, 7, 22}, {2, 5, 300, 5, 41}}) {
    for (DType dtype : {kUInt8, kFloat32}) {
      CAPTURE(C, H, W, out_h, out_w, dtype_name(dtype));
      // A non-contiguous view: every other column of a wider image.
      Tensor wide = (rand({C, H, 2 * W}) * 255.0).to(kUInt8).to(dtype);
      Tensor image = wide.slice(2, 0, 2 * W, 2);
      REQUIRE(!image.is_contiguous());
      Tensor out = Resize(out_h, out_w)(image, 0, 0, 0);
      REQUIRE(out.sizes() == Shape{C, out_h, out_w});
      REQUIRE(out.dtype() == dtype);
      std::vector<double> want = reference_resize(as_doubles(image), C, H, W, 0, 0, W, H, out_h, out_w);
      std::vector<double> got = as_doubles(out);
      for (size_t i = 0; i < want.size(); ++i) {
        if (dtype == kUInt8) {
          REQUIRE(std::abs(got[i] - std::clamp(want[i], 0.0, 255.0)) <= 0.5 + 1e-3);
        } else {
          REQUIRE(got[i] == Approx(want[i]).margin(1e-3));
        }
      }
    }
  }
}

TEST_CASE("Resize keeps the aspect ratio as torchvision does", "[image_transforms]") {
  CHECK(Resize(256).output_size(375, 500) == std::pair<int64_t, int64_t>{256, 341});
  CHECK(Resize(256).output_size(500, 375) == std::pair<int64_t, int64_t>{341, 256});
  CHECK(Resize(256).output_size(256, 700) == std::pair<int64_t, int64_t>{256, 700});
  CHECK(Resize(32).output_size(10, 10) == std::pair<int64_t, int64_t>{32, 32});
  CHECK(Resize(10, 12).output_size(99, 7) == std::pair<int64_t, int64_t>{10, 12});
  CHECK_THROWS_WITH(Resize(0)(zeros({1, 4, 4}, kUInt8), 0, 0, 0), Catch::Contains("Resize: the size must be positive"));
  CHECK_THROWS_WITH(Resize(4)(zeros({4, 4}, kUInt8), 0, 0, 0), Catch::Contains("Resize: expected an image [C, H, W]"));
}

TEST_CASE("CenterCrop centres with Python's rounding and pads small images with zeros", "[image_transforms]") {
  Tensor image = arange(1, 1 + 2 * 7 * 6, 1, TensorOptions(kInt64)).reshape({2, 7, 6});
  // (7 - 4) / 2 = 1.5 rounds to 2 and (6 - 3) / 2 = 1.5 to 2.
  Tensor crop = CenterCrop(4, 3)(image, 0, 0, 0);
  CHECK(crop.to_vector<int64_t>() == image.slice(1, 2, 6).slice(2, 2, 5).contiguous().to_vector<int64_t>());
  // 10 x 9 from 7 x 6: one row above (3 / 2), two below; one column left, two right.
  Tensor padded = CenterCrop(10, 9)(image, 0, 0, 0);
  CHECK(padded.slice(1, 1, 8).slice(2, 1, 7).contiguous().to_vector<int64_t>() == image.to_vector<int64_t>());
  CHECK(padded.sum().item<int64_t>() == image.sum().item<int64_t>());
}

TEST_CASE("The crop-aware decode matches a whole decode, crop and resize", "[image_transforms]") {
  // Large enough that many boxes are decoded at 1/2 or 1/4 of the file's size.
  const EncodedImage image = encoded_jpeg(800, 600, 11);
  const std::vector<double> whole = planar(image.decode());
  const int64_t out = 112;
  RandomResizedCrop roi(out), full(out);
  full.roi_decode(false);
  double worst_mean = 0, worst_max = 0;
  int reduced = 0;
  for (int64_t index = 0; index < 16; ++index) {
    ExampleRandom a(5, 0, index), b(5, 0, index), c(5, 0, index);
    Tensor got = empty({3, out, out}, TensorOptions(kUInt8)), plain = empty({3, out, out}, TensorOptions(kUInt8));
    roi.apply(image, got.data_ptr(), a);
    full.apply(image, plain.data_ptr(), b);
    const CropBox box = roi.box(600, 800, c);
    reduced += box.width >= 2 * out && box.height >= 2 * out;
    std::vector<double> want = reference_resize(whole, 3, 600, 800, box.left, box.top, box.width, box.height, out, out);
    std::vector<double> g = as_doubles(got), p = as_doubles(plain);
    double total = 0, worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      REQUIRE(std::abs(p[i] - want[i]) <= 0.5 + 1e-3);  // the whole decode's path is the reference, rounded
      const double diff = std::abs(g[i] - want[i]);
      total += diff, worst = std::max(worst, diff);
    }
    worst_mean = std::max(worst_mean, total / static_cast<double>(want.size()));
    worst_max = std::max(worst_max, worst);
  }
  INFO("worst mean " << worst_mean << ", worst pixel " << worst_max << ", reduced " << reduced);
  CHECK(reduced >= 6);
  // DCT reduction averages before the triangle filter does: a slightly smoother result (seen here:
  // at most 0.40 levels on average and 2.2 at worst). A box misplaced by one pixel differs by
  // the photo's texture, several levels on average.
  CHECK(worst_mean < 0.8);
  CHECK(worst_max < 5);
}

TEST_CASE("Resize of an encoded image decodes reduced and matches the whole decode", "[image_transforms]") {
  const EncodedImage image = encoded_jpeg(600, 450, 12);
  const std::vector<double> whole = planar(image.decode());
  Resize resize(100);  // 450 -> 100: decoded at 1/4
  TensorSpec spec = resize.output_spec(image);
  REQUIRE(spec.shape == Shape{3, 100, 133});
  Tensor got = empty(spec.shape, TensorOptions(kUInt8));
  ExampleRandom r(0, 0, 0);
  resize.apply(image, got.data_ptr(), r);
  std::vector<double> want = reference_resize(whole, 3, 450, 600, 0, 0, 600, 450, 100, 133);
  std::vector<double> g = as_doubles(got);
  double total = 0;
  for (size_t i = 0; i < want.size(); ++i) total += std::abs(g[i] - want[i]);
  CHECK(total / static_cast<double>(want.size()) < 1.0);
}

TEST_CASE("ColorJitter replays torchvision's adjustments in float64", "[image_transforms]") {
  ColorJitter jitter(0.4, 0.4, 0.4);
  for (int64_t index = 0; index < 20; ++index) {
    Tensor image = rand({3, 9, 13});
    Tensor got = jitter(image, 1, 2, index);
    // Replay: the order, then the three factors.
    ExampleRandom r(1, 2, index);
    int order[3] = {0, 1, 2};
    std::swap(order[0], order[r.randint(0, 3)]);
    std::swap(order[1], order[1 + r.randint(0, 2)]);
    double f[3];
    for (double& v : f) v = 0.6 + 0.8 * r.uniform();
    std::vector<double> x = as_doubles(image);
    const size_t n = 9 * 13;
    auto gray = [&](size_t i) { return 0.2989 * x[i] + 0.587 * x[n + i] + 0.114 * x[2 * n + i]; };
    for (int which : order) {
      std::vector<double> g(n);
      double mean = 0;
      for (size_t i = 0; i < n; ++i) mean += (g[i] = gray(i)) / n;
      for (size_t c = 0; c < 3; ++c)
        for (size_t i = 0; i < n; ++i) {
          double& v = x[c * n + i];
          const double other = which == 0 ? 0.0 : which == 1 ? mean : g[i];
          v = std::clamp(f[which] * v + (1 - f[which]) * other, 0.0, 1.0);
        }
    }
    std::vector<double> out = as_doubles(got);
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(out[i] == Approx(x[i]).margin(1e-5));
  }
  CHECK_THROWS_WITH(jitter(zeros({3, 4, 4}, kUInt8), 0, 0, 0),
                    Catch::Contains("ColorJitter: expected a float32 image"));
  CHECK_THROWS_WITH(ColorJitter(-1, 0, 0), Catch::Contains("must be >= 0"));
}
