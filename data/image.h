// Image files: JPEG through libjpeg-turbo and PNG through libpng, decoded to 8-bit RGB or
// grayscale, whole or only a region, and for JPEG at a DCT-reduced scale (1/2, 1/4, 1/8) when the
// caller needs fewer pixels than the file has. The format is told by the file's first bytes, never
// by its name (ImageNet has PNG files called .JPEG). Every fault, including a truncated file and
// an image larger than DecodeLimits::max_pixels, raises an ember::Error naming the file.
//
// What the decoder does like PIL, so that pixels agree with torchvision's loader: grayscale files
// are replicated to RGB; CMYK JPEGs with an Adobe marker are read as inverted CMYK (Photoshop's
// and PIL's convention) and converted with R = (255 - C)(255 - K)/255; a PNG's alpha is dropped,
// not composited; 16-bit PNGs keep their high byte; EXIF orientation is ignored, as torchvision
// ignores it.
//
//   std::vector<uint8_t> bytes = read_file_bytes("n01440764/img.JPEG");
//   ember::data::ImageHeader header = ember::data::read_image_header(bytes.data(), bytes.size(), "img.JPEG");
//   ember::data::DecodeRequest box;  // a 200 x 150 region, wanted at >= 100 x 75 pixels
//   box.left = 40, box.top = 10, box.width = 200, box.height = 150, box.min_width = 100, box.min_height = 75;
//   ember::data::DecodedImage region = ember::data::decode_image(bytes.data(), bytes.size(), "img.JPEG", box);
//   // region.scale == 0.5: the file was decoded at half size, 100 x 75 pixels plus the iMCU margin
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ember::data {

enum class ImageFormat { kJpeg, kPng };
const char* image_format_name(ImageFormat format);

struct DecodeLimits {
  // PIL refuses more than 2 x Image.MAX_IMAGE_PIXELS (89,478,485) pixels as a decompression bomb.
  int64_t max_pixels = 178956970;
};

struct ImageHeader {
  ImageFormat format = ImageFormat::kJpeg;
  int64_t width = 0;
  int64_t height = 0;
  int file_channels = 0;  // 1 gray, 2 gray + alpha, 3 RGB/YCbCr, 4 RGBA or CMYK
};

// True when the bytes start like a JPEG (FF D8 FF) or a PNG (the 8-byte signature).
bool looks_like_image(const uint8_t* bytes, size_t size);

// Parses only the header. Raises naming `name` for an unknown format, a corrupt or truncated
// header, a zero-sized image, or one of more than limits.max_pixels pixels.
ImageHeader read_image_header(const uint8_t* bytes, size_t size, const std::string& name,
                              const DecodeLimits& limits = {});

struct DecodeRequest {
  int channels = 3;  // 3: RGB; 1: grayscale (luma, as PIL's convert("L"))
  // The region wanted, in the full image's pixels; width 0 (or height 0) means the whole image.
  // A region reaching past the image is clipped to it.
  int64_t left = 0, top = 0, width = 0, height = 0;
  // JPEG only: the largest DCT reduction (1/2, 1/4 or 1/8) that still decodes the region to at
  // least min_width x min_height pixels is used. 0 (the default) decodes at full scale.
  int64_t min_width = 0, min_height = 0;
};

// Interleaved rows (height rows of width * channels bytes). The buffer covers at least the
// requested region, and maybe more (a JPEG region is widened to whole iMCUs): decoded pixel (x, y)
// is the full image's area [x0 + x * scale, x0 + (x + 1) * scale) by the same in y.
struct DecodedImage {
  int64_t width = 0;
  int64_t height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
  double x0 = 0.0, y0 = 0.0;
  double scale = 1.0;  // full-image pixels per decoded pixel: 1, 2, 4 or 8
};

DecodedImage decode_image(const uint8_t* bytes, size_t size, const std::string& name, const DecodeRequest& request = {},
                          const DecodeLimits& limits = {});

// An image file still encoded, as an ImageFolder hands it to its transforms: the crop and resize
// transforms decode only what they need of it (data/image_transforms.h).
class BadImageLog;

struct EncodedImage {
  std::string name;  // the file's path, for messages
  std::vector<uint8_t> bytes;
  ImageHeader header;
  int channels = 3;  // what decode() produces: 3 RGB, 1 grayscale
  DecodeLimits limits;
  // Set when a fault is to be skipped (ImageFolderOptions::skip_bad): the loader records the file
  // there and takes the next index's image instead of raising.
  std::shared_ptr<BadImageLog> bad_log;

  DecodedImage decode(DecodeRequest request = {}) const;
};

// Reads a whole file; raises naming the path when it cannot.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// Encoders, for tests, tools and benchmarks that write image trees. `pixels` are interleaved rows
// of `channels` bytes: 1 gray, 3 RGB, 4 CMYK (JPEG only: written with an Adobe marker as inverted
// CMYK, as Photoshop and PIL write it) or 4 RGBA (PNG only).
std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int64_t width, int64_t height, int channels, int quality = 90);
std::vector<uint8_t> encode_png(const uint8_t* pixels, int64_t width, int64_t height, int channels);

}  // namespace ember::data
