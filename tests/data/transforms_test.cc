// Each transform against expectations computed by hand: values for ToFloat and Normalize, pixel
// positions for RandomCrop / RandomHorizontalFlip / Cutout from the draws their headers document
// (replayed here with the same ExampleRandom), and Compose's chaining.
#include <catch2/catch.hpp>

#include <set>

#include "core/ember_core.h"
#include "data/transforms.h"

using namespace ember;
using namespace ember::data;

namespace {

// [C, H, W] with value 1 + 100 c + 10 y + x, so no pixel is 0 (0 marks padding) and each
// value tells where it came from.
Tensor coded_image(int64_t channels, int64_t height, int64_t width, DType dtype) {
  std::vector<float> values;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t y = 0; y < height; ++y) {
      for (int64_t x = 0; x < width; ++x) values.push_back(static_cast<float>(1 + 100 * c + 10 * y + x));
    }
  }
  return tensor(values, {channels, height, width}).to(dtype);
}

float at(const std::vector<float>& values, const Shape& shape, int64_t c, int64_t y, int64_t x) {
  return values[static_cast<size_t>((c * shape[1] + y) * shape[2] + x)];
}

}  // namespace

TEST_CASE("ToFloat maps uint8 to [0, 1] and copies float32", "[transforms]") {
  Tensor bytes = tensor(std::vector<uint8_t>{0, 51, 255, 128}, {1, 2, 2});
  Tensor out = ToFloat()(bytes, 0, 0, 0);
  CHECK(out.dtype() == kFloat32);
  CHECK(out.sizes() == Shape{1, 2, 2});
  CHECK(out.to_vector<float>() == std::vector<float>{0.0f, 0.2f, 1.0f, 128.0f / 255.0f});
  Tensor floats = tensor({0.5f, -1.0f});
  CHECK(ToFloat()(floats, 0, 0, 0).to_vector<float>() == std::vector<float>{0.5f, -1.0f});
  CHECK_THROWS_WITH(ToFloat()(zeros({2}, kInt64), 0, 0, 0), Catch::Contains("ToFloat: expected uint8 or float32"));
}

TEST_CASE("Normalize subtracts the channel mean and divides by its std", "[transforms]") {
  Tensor x = tensor({1.0f, 2.0f, 3.0f, 4.0f}, {2, 1, 2});
  CHECK(Normalize({1.0f, 2.0f}, {2.0f, 0.5f})(x, 0, 0, 0).to_vector<float>() ==
        std::vector<float>{0.0f, 0.5f, 2.0f, 4.0f});
  CHECK(Normalize({0.5f}, {0.25f})(x, 0, 0, 0).to_vector<float>() == std::vector<float>{2.0f, 6.0f, 10.0f, 14.0f});
  CHECK_THROWS_WITH(Normalize({0.5f}, {0.5f})(x.to(kUInt8), 0, 0, 0),
                    Catch::Contains("Normalize: expected float32 input (put ToFloat before it), got uint8"));
  CHECK_THROWS_WITH(Normalize({0.f, 0.f, 0.f}, {1.f, 1.f, 1.f})(x, 0, 0, 0),
                    Catch::Contains("3 means and stds for an image of 2 channels"));
  CHECK_THROWS_WITH(Normalize({0.f}, {0.f}), Catch::Contains("std[0] must be > 0"));
  CHECK_THROWS_WITH(Normalize({0.f}, {1.f})(zeros({4}), 0, 0, 0), Catch::Contains("expected an image [C, H, W]"));
}

TEST_CASE("RandomCrop places the window at the drawn offsets, zeros in the padding", "[transforms]") {
  const int64_t C = 2, H = 4, W = 5, padding = 2, crop_h = 3, crop_w = 4;
  std::set<int64_t> tops, lefts;
  for (DType dtype : {kUInt8, kFloat32}) {
    Tensor image = coded_image(C, H, W, dtype);
    RandomCrop crop(crop_h, crop_w, padding);
    for (int64_t index = 0; index < 200; ++index) {
      ExampleRandom replay(/*seed=*/5, /*epoch=*/1, index);
      const int64_t top = replay.randint(0, H + 2 * padding - crop_h + 1);
      const int64_t left = replay.randint(0, W + 2 * padding - crop_w + 1);
      tops.insert(top);
      lefts.insert(left);
      Tensor out = crop(image, 5, 1, index);
      REQUIRE(out.sizes() == Shape{C, crop_h, crop_w});
      REQUIRE(out.dtype() == dtype);
      std::vector<float> got = out.to(kFloat32).to_vector<float>();
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t y = 0; y < crop_h; ++y) {
          for (int64_t x = 0; x < crop_w; ++x) {
            int64_t sy = top + y - padding, sx = left + x - padding;
            bool inside = sy >= 0 && sy < H && sx >= 0 && sx < W;
            float expected = inside ? static_cast<float>(1 + 100 * c + 10 * sy + sx) : 0.0f;
            INFO("index " << index << " top " << top << " left " << left << " at " << c << "," << y << "," << x);
            REQUIRE(at(got, out.sizes(), c, y, x) == expected);
          }
        }
      }
    }
  }
  CHECK(tops == std::set<int64_t>{0, 1, 2, 3, 4, 5});  // every offset, padding on both sides included
  CHECK(lefts == std::set<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK_THROWS_WITH(RandomCrop(9, 1)(zeros({1, 4, 4}), 0, 0, 0),
                    Catch::Contains("RandomCrop: a 9x9 crop does not fit an image [1, 4, 4] padded by 1"));
}

TEST_CASE("RandomCrop without padding of the full size is the identity", "[transforms]") {
  Tensor image = coded_image(3, 6, 6, kUInt8);
  CHECK(RandomCrop(6)(image, 1, 2, 3).to_vector<uint8_t>() == image.to_vector<uint8_t>());
}

TEST_CASE("RandomHorizontalFlip mirrors columns when its draw is below p", "[transforms]") {
  for (DType dtype : {kUInt8, kFloat32, kInt64}) {
    Tensor image = coded_image(2, 3, 5, dtype);
    std::vector<float> original = image.to(kFloat32).to_vector<float>();
    std::vector<float> mirrored = original;
    for (int64_t c = 0; c < 2; ++c) {
      for (int64_t y = 0; y < 3; ++y) {
        for (int64_t x = 0; x < 5; ++x) {
          mirrored[static_cast<size_t>((c * 3 + y) * 5 + x)] = at(original, {2, 3, 5}, c, y, 4 - x);
        }
      }
    }
    CHECK(RandomHorizontalFlip(1.0)(image, 0, 0, 0).to(kFloat32).to_vector<float>() == mirrored);
    CHECK(RandomHorizontalFlip(0.0)(image, 0, 0, 0).to(kFloat32).to_vector<float>() == original);
    int flips = 0;
    for (int64_t index = 0; index < 100; ++index) {
      bool expect_flip = ExampleRandom(9, 0, index).uniform() < 0.5f;
      flips += expect_flip;
      std::vector<float> got = RandomHorizontalFlip()(image, 9, 0, index).to(kFloat32).to_vector<float>();
      REQUIRE(got == (expect_flip ? mirrored : original));
    }
    CHECK(flips > 20);
    CHECK(flips < 80);
  }
}

TEST_CASE("Cutout zeroes the drawn square, clipped to the image", "[transforms]") {
  const int64_t C = 3, H = 7, W = 6;
  for (int64_t size : {2, 3, 4}) {
    int full_squares = 0, clipped = 0;
    for (int64_t index = 0; index < 100; ++index) {
      ExampleRandom replay(4, 2, index);
      replay.uniform();  // the apply-or-not draw
      const int64_t cy = replay.randint(0, H), cx = replay.randint(0, W);
      const int64_t y0 = std::max<int64_t>(0, cy - size / 2), y1 = std::min<int64_t>(H, cy - size / 2 + size);
      const int64_t x0 = std::max<int64_t>(0, cx - size / 2), x1 = std::min<int64_t>(W, cx - size / 2 + size);
      std::vector<float> got = Cutout(size)(ones({C, H, W}), 4, 2, index).to_vector<float>();
      int64_t zeros_found = 0;
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t y = 0; y < H; ++y) {
          for (int64_t x = 0; x < W; ++x) {
            bool in_square = y >= y0 && y < y1 && x >= x0 && x < x1;
            REQUIRE(at(got, {C, H, W}, c, y, x) == (in_square ? 0.0f : 1.0f));
            zeros_found += in_square;
          }
        }
      }
      REQUIRE(zeros_found == C * (y1 - y0) * (x1 - x0));
      if (y1 - y0 == size && x1 - x0 == size) {
        ++full_squares;
      } else {
        ++clipped;
      }
    }
    CHECK(full_squares > 0);  // both cases occur among 100 draws
    CHECK(clipped > 0);
  }
  CHECK(Cutout(3, /*p=*/0.0)(ones({1, 5, 5}), 0, 0, 0).to_vector<float>() == std::vector<float>(25, 1.0f));
  Tensor bytes = Cutout(8)(full({2, 4, 4}, 7, TensorOptions(kUInt8)), 0, 0, 0);  // covers the whole image
  CHECK(bytes.to_vector<uint8_t>() == std::vector<uint8_t>(32, 0));
}

TEST_CASE("Compose chains transforms on one random stream", "[transforms]") {
  Tensor image = coded_image(3, 8, 8, kUInt8);
  Compose pipeline(RandomCrop(6, 1), RandomHorizontalFlip(), ToFloat(), Normalize({0.5f}, {0.25f}));
  CHECK(pipeline.transforms().size() == 4);
  for (int64_t index = 0; index < 20; ++index) {
    ExampleRandom random(3, 7, index);
    Tensor step = RandomCrop(6, 1)(image, random);
    step = RandomHorizontalFlip()(step, random);
    step = ToFloat()(step, random);
    step = Normalize({0.5f}, {0.25f})(step, random);
    Tensor composed = pipeline(image, 3, 7, index);
    REQUIRE(composed.sizes() == Shape{3, 6, 6});
    REQUIRE(composed.to_vector<float>() == step.to_vector<float>());
  }
  CHECK(pipeline.output_spec({{3, 8, 8}, kUInt8}) == TensorSpec{{3, 6, 6}, kFloat32});

  auto inner = std::make_shared<Compose>(ToFloat(), Normalize({0.5f}, {0.25f}));
  Compose nested(std::vector<TransformPtr>{std::make_shared<RandomCrop>(6, 1), inner});
  CHECK(nested.transforms().size() == 3);  // flattened
  CHECK(nested(image, 3, 7, 1).to_vector<float>() ==
        Compose(RandomCrop(6, 1), ToFloat(), Normalize({0.5f}, {0.25f}))(image, 3, 7, 1).to_vector<float>());

  Compose identity{std::vector<TransformPtr>{}};
  CHECK(identity(image, 0, 0, 0).to_vector<uint8_t>() == image.to_vector<uint8_t>());
  CHECK_THROWS_WITH(Compose(Normalize({0.5f}, {0.5f}), ToFloat())(image, 0, 0, 0),
                    Catch::Contains("Normalize: expected float32 input"));
}

TEST_CASE("Augmentations depend on (seed, epoch, index) only", "[transforms]") {
  Tensor image = coded_image(1, 10, 10, kUInt8);
  Compose augment(RandomCrop(8, 2), RandomHorizontalFlip(), Cutout(3));
  auto run = [&](uint64_t seed, int64_t epoch, int64_t index) {
    return augment(image, seed, epoch, index).to_vector<uint8_t>();
  };
  int differ_by_epoch = 0, differ_by_seed = 0;
  for (int64_t index = 0; index < 10; ++index) {
    REQUIRE(run(1, 2, index) == run(1, 2, index));
    differ_by_epoch += run(1, 2, index) != run(1, 3, index);
    differ_by_seed += run(1, 2, index) != run(2, 2, index);
  }
  CHECK(differ_by_epoch >= 8);
  CHECK(differ_by_seed >= 8);
}
