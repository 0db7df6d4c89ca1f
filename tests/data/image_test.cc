// The image decoders against their sources: PNG exactly, JPEG within its loss; the conversions
// PIL makes (gray to RGB, CMYK to RGB, alpha dropped, RGB to luma) against float formulas; regions
// and DCT-reduced decodes against the whole decode; and every kind of bad file raising an error
// that names the file.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <zlib.h>

#include "core/error.h"
#include "data/image.h"
#include "tests/data/test_files.h"

using namespace ember;
using namespace ember::data;
using ember::data::testing::photo_pixels;

namespace {

double mean_abs_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  REQUIRE(a.size() == b.size());
  double total = 0;
  for (size_t i = 0; i < a.size(); ++i) total += std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
  return total / static_cast<double>(a.size());
}

DecodedImage decode(const std::vector<uint8_t>& bytes, DecodeRequest request = {}, const std::string& name = "x") {
  return decode_image(bytes.data(), bytes.size(), name, request);
}

// The PNG chunk starting at `at` gets a correct CRC again after an edit.
void fix_png_crc(std::vector<uint8_t>& png, size_t at) {
  const uint32_t length = (png[at] << 24) | (png[at + 1] << 16) | (png[at + 2] << 8) | png[at + 3];
  uLong crc = crc32(0, png.data() + at + 4, length + 4);
  for (int k = 0; k < 4; ++k) png[at + 8 + length + k] = static_cast<uint8_t>(crc >> (24 - 8 * k));
}

size_t find_jpeg_marker(const std::vector<uint8_t>& jpeg, uint8_t marker) {
  for (size_t i = 0; i + 1 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] == marker) return i;
  }
  FAIL("no marker");
  return 0;
}

}  // namespace

TEST_CASE("PNG decodes exactly: RGB, gray widened, alpha dropped, luma as PIL", "[image]") {
  const int64_t W = 37, H = 23;
  std::vector<uint8_t> rgb = photo_pixels(W, H, 3, 1);
  DecodedImage image = decode(encode_png(rgb.data(), W, H, 3));
  CHECK(image.width == W);
  CHECK(image.height == H);
  CHECK(image.channels == 3);
  CHECK(image.pixels == rgb);

  std::vector<uint8_t> gray = photo_pixels(W, H, 1, 2);
  DecodedImage widened = decode(encode_png(gray.data(), W, H, 1));
  for (int64_t i = 0; i < W * H; ++i) {
    for (int c = 0; c < 3; ++c) REQUIRE(widened.pixels[static_cast<size_t>(3 * i + c)] == gray[static_cast<size_t>(i)]);
  }
  DecodeRequest one;
  one.channels = 1;
  CHECK(decode(encode_png(gray.data(), W, H, 1), one).pixels == gray);

  std::vector<uint8_t> rgba = photo_pixels(W, H, 4, 3);
  DecodedImage dropped = decode(encode_png(rgba.data(), W, H, 4));
  for (int64_t i = 0; i < W * H; ++i) {
    for (int c = 0; c < 3; ++c)
      REQUIRE(dropped.pixels[static_cast<size_t>(3 * i + c)] == rgba[static_cast<size_t>(4 * i + c)]);
  }

  DecodedImage luma = decode(encode_png(rgb.data(), W, H, 3), one);
  REQUIRE(luma.pixels.size() == static_cast<size_t>(W * H));
  for (int64_t i = 0; i < W * H; ++i) {
    const double expected = 0.299 * rgb[3 * i] + 0.587 * rgb[3 * i + 1] + 0.114 * rgb[3 * i + 2];
    REQUIRE(std::abs(luma.pixels[static_cast<size_t>(i)] - expected) <= 0.51);
  }
}

TEST_CASE("JPEG decodes within its loss: RGB, gray widened, Adobe CMYK converted as PIL", "[image]") {
  const int64_t W = 53, H = 41;
  std::vector<uint8_t> rgb = photo_pixels(W, H, 3, 4);
  DecodedImage image = decode(encode_jpeg(rgb.data(), W, H, 3, 95));
  CHECK(image.width == W);
  CHECK(image.height == H);
  CHECK(mean_abs_diff(image.pixels, rgb) < 3.5);

  std::vector<uint8_t> gray = photo_pixels(W, H, 1, 5);
  DecodedImage widened = decode(encode_jpeg(gray.data(), W, H, 1, 95));
  std::vector<uint8_t> first_channel;
  for (int64_t i = 0; i < W * H; ++i) {
    REQUIRE(widened.pixels[3 * i] == widened.pixels[3 * i + 1]);
    REQUIRE(widened.pixels[3 * i] == widened.pixels[3 * i + 2]);
    first_channel.push_back(widened.pixels[3 * i]);
  }
  CHECK(mean_abs_diff(first_channel, gray) < 2.0);

  // Ink values; the file stores them inverted behind an Adobe marker, as Photoshop and PIL do.
  std::vector<uint8_t> cmyk = photo_pixels(W, H, 4, 6);
  std::vector<uint8_t> bytes = encode_jpeg(cmyk.data(), W, H, 4, 95);
  CHECK(read_image_header(bytes.data(), bytes.size(), "cmyk.jpg").file_channels == 4);
  DecodedImage converted = decode(bytes);
  REQUIRE(converted.channels == 3);
  std::vector<uint8_t> expected(static_cast<size_t>(W * H * 3));
  for (int64_t i = 0; i < W * H; ++i) {
    for (int c = 0; c < 3; ++c) {
      expected[3 * i + c] =
          static_cast<uint8_t>(std::lround((255.0 - cmyk[4 * i + c]) * (255.0 - cmyk[4 * i + 3]) / 255.0));
    }
  }
  CHECK(mean_abs_diff(converted.pixels, expected) < 3.0);
}

TEST_CASE("The format comes from the bytes, not the name", "[image]") {
  std::vector<uint8_t> rgb = photo_pixels(9, 7, 3, 7);
  std::vector<uint8_t> png = encode_png(rgb.data(), 9, 7, 3);
  ImageHeader header = read_image_header(png.data(), png.size(), "n01440764_42.JPEG");
  CHECK(header.format == ImageFormat::kPng);
  CHECK(header.width == 9);
  CHECK(header.height == 7);
  CHECK(decode(png, {}, "n01440764_42.JPEG").pixels == rgb);
  CHECK(looks_like_image(png.data(), png.size()));
}

TEST_CASE("A region decodes the same pixels as the whole image; a reduced decode averages them", "[image]") {
  const int64_t W = 301, H = 203;
  std::vector<uint8_t> rgb = photo_pixels(W, H, 3, 8);
  std::vector<uint8_t> jpeg = encode_jpeg(rgb.data(), W, H, 3, 90);
  DecodedImage whole = decode(jpeg);
  for (auto [left, top, width, height] : std::vector<std::array<int64_t, 4>>{
           {0, 0, W, H}, {37, 21, 100, 80}, {200, 150, 101, 53}, {5, 190, 7, 13}, {250, 0, 51, 203}}) {
    DecodeRequest request;
    request.left = left, request.top = top, request.width = width, request.height = height;
    DecodedImage region = decode(jpeg, request);
    CAPTURE(left, top, width, height, region.x0, region.y0, region.width, region.height);
    REQUIRE(region.scale == 1.0);
    REQUIRE(region.x0 <= left);
    REQUIRE(region.y0 == top);
    REQUIRE(region.x0 + region.width >= left + width);
    REQUIRE(region.height == height);
    // libjpeg-turbo's cropped and skipped rows round their upsampling slightly differently from a
    // whole decode's (seen: at most 2 levels, in a few pixels); a misplaced row or column would
    // differ by the photo's texture, tens of levels.
    int worst = 0, differing = 0;
    for (int64_t y = 0; y < region.height; ++y) {
      for (int64_t x = 0; x < region.width * 3; ++x) {
        const int full = whole.pixels[((top + y) * W + static_cast<int64_t>(region.x0)) * 3 + x];
        const int diff = std::abs(full - region.pixels[y * region.width * 3 + x]);
        worst = std::max(worst, diff);
        differing += diff > 0;
      }
    }
    CHECK(worst <= 2);
    CHECK(differing <= region.width * region.height * 3 / 20);
  }

  for (int64_t reduce : {2, 4, 8}) {
    DecodeRequest request;
    request.min_width = W / reduce, request.min_height = H / reduce;
    DecodedImage small = decode(jpeg, request);
    CAPTURE(reduce);
    REQUIRE(small.scale == static_cast<double>(reduce));
    REQUIRE(small.width == (W + reduce - 1) / reduce);
    REQUIRE(small.height == (H + reduce - 1) / reduce);
    // Against the whole decode's reduce x reduce block means, away from the ragged last block.
    double total = 0;
    int64_t count = 0;
    for (int64_t y = 0; y < H / reduce; ++y) {
      for (int64_t x = 0; x < W / reduce; ++x) {
        for (int c = 0; c < 3; ++c) {
          double mean = 0;
          for (int64_t dy = 0; dy < reduce; ++dy)
            for (int64_t dx = 0; dx < reduce; ++dx)
              mean += whole.pixels[((y * reduce + dy) * W + x * reduce + dx) * 3 + c];
          mean /= static_cast<double>(reduce * reduce);
          total += std::abs(mean - small.pixels[(y * small.width + x) * 3 + c]);
          ++count;
        }
      }
    }
    CHECK(total / static_cast<double>(count) < 2.0);
  }
  // Too small a region for any reduction stays at full scale.
  DecodeRequest tight;
  tight.left = 10, tight.top = 10, tight.width = 60, tight.height = 60, tight.min_width = 40, tight.min_height = 40;
  CHECK(decode(jpeg, tight).scale == 1.0);
}

TEST_CASE("Bad image files raise errors that name the file and the fault", "[image]") {
  std::vector<uint8_t> rgb = photo_pixels(64, 48, 3, 9);
  std::vector<uint8_t> jpeg = encode_jpeg(rgb.data(), 64, 48, 3, 90);
  std::vector<uint8_t> png = encode_png(rgb.data(), 64, 48, 3);
  auto fails = [](const std::vector<uint8_t>& bytes, const std::string& fault, DecodeRequest request = {}) {
    CAPTURE(fault);
    CHECK_THROWS_WITH(decode_image(bytes.data(), bytes.size(), "dir/bad.jpg", request),
                      Catch::Contains("decode_image: dir/bad.jpg: ") && Catch::Contains(fault));
  };
  fails({}, "the file is empty (0 bytes)");
  fails({'G', 'I', 'F', '8', '9', 'a', 0, 0},
        "not a JPEG or PNG file (expected it to start with FF D8 FF or the PNG "
        "signature, found 47 49 46 38 39 61 00 00)");
  // Cut anywhere in the image data, as a download that stopped: refused whole and as a region
  // whose rows end before the cut.
  for (double keep : {0.3, 0.7, 0.97}) {
    std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(keep * jpeg.size()));
    fails(cut, "truncated JPEG data");
    DecodeRequest top_rows;
    top_rows.width = 16, top_rows.height = 8;
    fails(cut, "truncated JPEG data", top_rows);
  }
  std::vector<uint8_t> header_only(jpeg.begin(), jpeg.begin() + 40);
  CHECK_THROWS_WITH(read_image_header(header_only.data(), header_only.size(), "h.jpg"),
                    Catch::Contains("read_image_header: h.jpg: "));
  // A frame header claiming 0 rows and one claiming 65535 x 65535 pixels.
  std::vector<uint8_t> zero = jpeg, bomb = jpeg;
  const size_t sof = find_jpeg_marker(jpeg, 0xC0);
  zero[sof + 5] = zero[sof + 6] = 0;
  fails(zero, "");
  bomb[sof + 5] = bomb[sof + 7] = 0xEA;  // 60000 x 60000: libjpeg itself stops at 65500
  bomb[sof + 6] = bomb[sof + 8] = 0x60;
  fails(bomb, "60000x60000 = 3600000000 pixels, more than the limit of 178956970 (a decompression bomb?)");
  CHECK_THROWS_WITH(read_image_header(bomb.data(), bomb.size(), "bomb.jpg"), Catch::Contains("decompression bomb"));
  DecodeLimits low;
  low.max_pixels = 64 * 48 - 1;
  CHECK_THROWS_WITH(decode_image(jpeg.data(), jpeg.size(), "a.jpg", {}, low),
                    Catch::Contains("more than the limit of 3071"));
  // A corrupt marker segment: the quantisation table's length runs past the file.
  std::vector<uint8_t> corrupt = jpeg;
  const size_t dqt = find_jpeg_marker(jpeg, 0xDB);
  corrupt[dqt + 2] = 0xFF;
  fails(corrupt, "");

  // PNG: a flipped byte in the compressed data (inflate notices first), in a chunk's CRC, in the
  // header (its CRC no longer matches); a PNG that
  // claims 65535 x 65535 with a valid CRC is a bomb; a cut file is truncated.
  const size_t ihdr = 8, idat = ihdr + 25;
  REQUIRE(std::memcmp(png.data() + idat + 4, "IDAT", 4) == 0);
  std::vector<uint8_t> bad_crc = png;
  bad_crc[idat + 12] ^= 0x40;
  fails(bad_crc, "IDAT: ");
  const uint32_t idat_length = (png[idat] << 24) | (png[idat + 1] << 16) | (png[idat + 2] << 8) | png[idat + 3];
  bad_crc = png;
  bad_crc[idat + 8 + idat_length + 2] ^= 0x01;
  fails(bad_crc, "IDAT: CRC error");
  std::vector<uint8_t> bad_header = png;
  bad_header[ihdr + 9] ^= 0x01;
  fails(bad_header, "CRC error");
  std::vector<uint8_t> png_bomb = png;
  for (int k = 0; k < 8; ++k) png_bomb[ihdr + 8 + k] = k % 4 < 2 ? 0x00 : 0xFF;
  fix_png_crc(png_bomb, ihdr);
  fails(png_bomb, "65535x65535 = 4294836225 pixels");
  std::vector<uint8_t> png_cut(png.begin(), png.begin() + static_cast<std::ptrdiff_t>(png.size() / 2));
  fails(png_cut, "truncated PNG data");

  CHECK_THROWS_WITH(read_file_bytes("/nonexistent/x.jpg"),
                    Catch::Contains("read_file_bytes: cannot open '/nonexistent/x.jpg'"));
  DecodeRequest two;
  two.channels = 2;
  CHECK_THROWS_WITH(decode(jpeg, two), Catch::Contains("channels must be 1 (grayscale) or 3 (RGB), got 2"));
  CHECK_THROWS_WITH(encode_png(rgb.data(), 64, 48, 2), Catch::Contains("encode_png: channels 2 not supported"));
}
