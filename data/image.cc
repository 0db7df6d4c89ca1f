// The format-independent half of image files: telling JPEG from PNG by their bytes, naming the
// file in every fault, the checks the encoders' callers need, and the pixel helpers both formats
// share. The formats themselves are in image_jpeg.cc and image_png.cc.
#include "data/image.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "data/image_codecs.h"

namespace ember::data {

namespace {

bool is_jpeg(const uint8_t* bytes, size_t size) {
  return size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF;
}

bool is_png(const uint8_t* bytes, size_t size) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return size >= 8 && std::memcmp(bytes, kSignature, 8) == 0;
}

// Runs a format's function with its faults prefixed by the operation and the file.
template <typename Body>
auto naming(const char* op, const std::string& name, Body body) {
  try {
    return body();
  } catch (const Error& e) {
    throw Error(std::string(op) + ": " + name + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw Error(std::string(op) + ": " + name + ": out of memory");
  }
}

std::string first_bytes_hex(const uint8_t* bytes, size_t size) {
  std::string out;
  char hex[4];
  for (size_t i = 0; i < std::min<size_t>(size, 8); ++i) {
    std::snprintf(hex, sizeof hex, "%02X", bytes[i]);
    out += (i ? " " : "") + std::string(hex);
  }
  return out;
}

void check_format(const char* op, const uint8_t* bytes, size_t size, const std::string& name) {
  EMBER_CHECK(size > 0, op, ": ", name, ": the file is empty (0 bytes)");
  EMBER_CHECK(is_jpeg(bytes, size) || is_png(bytes, size), op, ": ", name,
              ": not a JPEG or PNG file (expected it to start with FF D8 FF or the PNG signature, found ",
              first_bytes_hex(bytes, size), ")");
}

}  // namespace

const char* image_format_name(ImageFormat format) { return format == ImageFormat::kJpeg ? "JPEG" : "PNG"; }

bool looks_like_image(const uint8_t* bytes, size_t size) { return is_jpeg(bytes, size) || is_png(bytes, size); }

ImageHeader read_image_header(const uint8_t* bytes, size_t size, const std::string& name, const DecodeLimits& limits) {
  check_format("read_image_header", bytes, size, name);
  return naming("read_image_header", name, [&] {
    return is_jpeg(bytes, size) ? detail::jpeg_header(bytes, size, limits) : detail::png_header(bytes, size, limits);
  });
}

DecodedImage decode_image(const uint8_t* bytes, size_t size, const std::string& name, const DecodeRequest& request,
                          const DecodeLimits& limits) {
  EMBER_CHECK(request.channels == 1 || request.channels == 3, "decode_image: ", name,
              ": channels must be 1 (grayscale) or 3 (RGB), got ", request.channels);
  EMBER_CHECK(request.width >= 0 && request.height >= 0 && request.min_width >= 0 && request.min_height >= 0,
              "decode_image: ", name, ": the region's sizes must be >= 0, got ", request.width, "x", request.height,
              " (at least ", request.min_width, "x", request.min_height, ")");
  check_format("decode_image", bytes, size, name);
  return naming("decode_image", name, [&] {
    return is_jpeg(bytes, size) ? detail::jpeg_decode(bytes, size, request, limits)
                                : detail::png_decode(bytes, size, request, limits);
  });
}

DecodedImage EncodedImage::decode(DecodeRequest request) const {
  request.channels = channels;
  return decode_image(bytes.data(), bytes.size(), name, request, limits);
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  // One read of the whole file: the stream's iterators go byte by byte, 20x slower on a 100 KB JPEG.
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  EMBER_CHECK(in.good(), "read_file_bytes: cannot open '", path, "': ", std::strerror(errno));
  const std::streamoff size = in.tellg();
  EMBER_CHECK(size >= 0, "read_file_bytes: cannot tell the size of '", path, "'");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  EMBER_CHECK(in.gcount() == size, "read_file_bytes: reading '", path, "' stopped after ", in.gcount(), " of ", size,
              " bytes: ", std::strerror(errno));
  return bytes;
}

namespace {

void check_encode(const char* op, const uint8_t* pixels, int64_t width, int64_t height, int channels,
                  std::initializer_list<int> allowed) {
  EMBER_CHECK(pixels != nullptr && width > 0 && height > 0 && width <= 65535 && height <= 65535, op,
              ": expected a non-null image of 1..65535 x 1..65535 pixels, got ", width, "x", height);
  EMBER_CHECK(std::find(allowed.begin(), allowed.end(), channels) != allowed.end(), op, ": channels ", channels,
              " not supported (1 gray, 3 RGB, 4 ", std::string(op) == "encode_jpeg" ? "CMYK" : "RGBA", ")");
}

}  // namespace

std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int64_t width, int64_t height, int channels, int quality) {
  check_encode("encode_jpeg", pixels, width, height, channels, {1, 3, 4});
  EMBER_CHECK(quality >= 1 && quality <= 100, "encode_jpeg: quality must be in 1..100, got ", quality);
  return naming("encode_jpeg", "<memory>",
                [&] { return detail::jpeg_encode(pixels, width, height, channels, quality); });
}

std::vector<uint8_t> encode_png(const uint8_t* pixels, int64_t width, int64_t height, int channels) {
  check_encode("encode_png", pixels, width, height, channels, {1, 3, 4});
  return naming("encode_png", "<memory>", [&] { return detail::png_encode(pixels, width, height, channels); });
}

namespace detail {

void check_pixel_count(int64_t width, int64_t height, const DecodeLimits& limits) {
  EMBER_CHECK(width > 0 && height > 0, "the image claims ", width, "x", height, " pixels");
  EMBER_CHECK(width * height <= limits.max_pixels, "the image claims ", width, "x", height, " = ", width * height,
              " pixels, more than the limit of ", limits.max_pixels,
              " (a decompression bomb?); raise DecodeLimits::max_pixels to read it");
}

void rgb_to_gray_in_place(uint8_t* pixels, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t* rgb = pixels + 3 * i;
    pixels[i] = static_cast<uint8_t>((19595 * rgb[0] + 38470 * rgb[1] + 7471 * rgb[2] + 32768) >> 16);
  }
}

void keep_rows(DecodedImage& image, int64_t top, int64_t height) {
  top = std::clamp<int64_t>(top, 0, image.height - 1);
  const int64_t bottom = std::min(image.height, top + height);
  const size_t row = static_cast<size_t>(image.width * image.channels);
  image.pixels.erase(image.pixels.begin() + static_cast<std::ptrdiff_t>(bottom * row), image.pixels.end());
  image.pixels.erase(image.pixels.begin(), image.pixels.begin() + static_cast<std::ptrdiff_t>(top * row));
  image.height = bottom - top;
  image.y0 = static_cast<double>(top);
}

}  // namespace detail

}  // namespace ember::data
