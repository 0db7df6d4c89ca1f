// PNG through libpng. libpng reports faults by longjmp to the setjmp of the step that called it, so
// as in image_jpeg.cc each step is a function whose frame holds no C++ object, with its buffers
// allocated by the caller. PNG has no reduced-scale decode: a region is cut from the whole image.
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "data/image_codecs.h"

namespace ember::data::detail {

namespace {

struct Png {
  png_structp png = nullptr;
  png_infop info = nullptr;
  bool writing = false;
  const uint8_t* bytes = nullptr;  // reading: the file and the read position
  size_t size = 0, at = 0;
  std::vector<uint8_t>* out = nullptr;  // writing
  char message[256] = "libpng failed";
  ~Png() {
    if (writing) {
      png_destroy_write_struct(&png, &info);
    } else if (png) {
      png_destroy_read_struct(&png, &info, nullptr);
    }
  }
};

[[noreturn]] void on_error(png_structp png, png_const_charp message) {
  auto* state = static_cast<Png*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof state->message, "%s", message);
  png_longjmp(png, 1);
}

// Faults libpng recovers from (a bad CRC in an ancillary chunk, which it drops), as PIL ignores them.
void on_warning(png_structp, png_const_charp) {}

void read_bytes(png_structp png, png_bytep out, size_t count) {
  auto* state = static_cast<Png*>(png_get_io_ptr(png));
  if (state->size - state->at < count) png_error(png, "truncated PNG data");
  std::memcpy(out, state->bytes + state->at, count);
  state->at += count;
}

void write_bytes(png_structp png, png_bytep data, size_t count) {
  auto* state = static_cast<Png*>(png_get_io_ptr(png));
  state->out->insert(state->out->end(), data, data + count);
}

void flush(png_structp) {}

bool open_step(Png* s) {
  s->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, s, on_error, on_warning);
  if (!s->png) return false;
  s->info = png_create_info_struct(s->png);
  if (!s->info) return false;
  if (setjmp(png_jmpbuf(s->png))) return false;
  png_set_read_fn(s->png, s, read_bytes);
  png_read_info(s->png, s->info);
  return true;
}

// 8-bit samples, the palette expanded, alpha dropped (PIL's convert("RGB") drops it), and gray
// widened to RGB when RGB is wanted.
bool transform_step(Png* s, bool rgb) {
  if (setjmp(png_jmpbuf(s->png))) return false;
  const int color = png_get_color_type(s->png, s->info);
  if (png_get_bit_depth(s->png, s->info) == 16) png_set_strip_16(s->png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(s->png);
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) {
    png_set_expand_gray_1_2_4_to_8(s->png);
    if (rgb) png_set_gray_to_rgb(s->png);
  }
  if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(s->png);
  png_set_interlace_handling(s->png);
  png_read_update_info(s->png, s->info);
  return true;
}

// Reads every row and then the chunks up to IEND, so a bad CRC anywhere in the image data or a
// missing end raises even when only some rows are kept.
bool read_step(Png* s, png_bytep* rows) {
  if (setjmp(png_jmpbuf(s->png))) return false;
  png_read_image(s->png, rows);
  png_read_end(s->png, nullptr);
  return true;
}

bool write_step(Png* s, png_uint_32 width, png_uint_32 height, int channels, png_bytep* rows) {
  s->writing = true;
  s->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, s, on_error, on_warning);
  if (!s->png) return false;
  s->info = png_create_info_struct(s->png);
  if (!s->info) return false;
  if (setjmp(png_jmpbuf(s->png))) return false;
  png_set_write_fn(s->png, s, write_bytes, flush);
  const int color = channels == 1   ? PNG_COLOR_TYPE_GRAY
                    : channels == 2 ? PNG_COLOR_TYPE_GRAY_ALPHA
                    : channels == 3 ? PNG_COLOR_TYPE_RGB
                                    : PNG_COLOR_TYPE_RGB_ALPHA;
  png_set_IHDR(s->png, s->info, width, height, 8, color, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(s->png, s->info);
  png_write_image(s->png, rows);
  png_write_end(s->png, nullptr);
  return true;
}

int file_channels(int color) {
  switch (color) {
    case PNG_COLOR_TYPE_GRAY:
      return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      return 2;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      return 4;
    default:  // RGB and palette
      return 3;
  }
}

}  // namespace

ImageHeader png_header(const uint8_t* bytes, size_t size, const DecodeLimits& limits) {
  Png s;
  s.bytes = bytes, s.size = size;
  if (!open_step(&s)) throw Error(s.message);
  ImageHeader header;
  header.format = ImageFormat::kPng;
  header.width = png_get_image_width(s.png, s.info);
  header.height = png_get_image_height(s.png, s.info);
  header.file_channels = file_channels(png_get_color_type(s.png, s.info));
  check_pixel_count(header.width, header.height, limits);
  return header;
}

DecodedImage png_decode(const uint8_t* bytes, size_t size, const DecodeRequest& request, const DecodeLimits& limits) {
  Png s;
  s.bytes = bytes, s.size = size;
  if (!open_step(&s)) throw Error(s.message);
  const int64_t width = png_get_image_width(s.png, s.info), height = png_get_image_height(s.png, s.info);
  check_pixel_count(width, height, limits);
  const bool gray_file = file_channels(png_get_color_type(s.png, s.info)) <= 2;
  // Color to gray goes through RGB so that the luma formula is PIL's, as for JPEG's CMYK.
  const bool rgb = request.channels == 3 || !gray_file;
  if (!transform_step(&s, rgb)) throw Error(s.message);
  const size_t row_bytes = png_get_rowbytes(s.png, s.info);
  EMBER_CHECK(row_bytes == static_cast<size_t>(width) * (rgb ? 3 : 1), "unexpected PNG row size ", row_bytes, " for ",
              width, " pixels");

  DecodedImage image;
  image.width = width;
  image.height = height;
  image.channels = request.channels;
  image.pixels.resize(row_bytes * static_cast<size_t>(height));
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int64_t y = 0; y < height; ++y) rows[static_cast<size_t>(y)] = image.pixels.data() + y * row_bytes;
  if (!read_step(&s, rows.data())) throw Error(s.message);
  if (rgb && request.channels == 1) {
    rgb_to_gray_in_place(image.pixels.data(), width * height);
    image.pixels.resize(static_cast<size_t>(width * height));
  }
  if (request.width > 0 && request.height > 0) keep_rows(image, request.top, request.height);
  return image;
}

std::vector<uint8_t> png_encode(const uint8_t* pixels, int64_t width, int64_t height, int channels) {
  std::vector<uint8_t> out;
  Png s;
  s.out = &out;
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int64_t y = 0; y < height; ++y)
    rows[static_cast<size_t>(y)] = const_cast<uint8_t*>(pixels + y * width * channels);
  if (!write_step(&s, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), channels, rows.data())) {
    throw Error(s.message);
  }
  return out;
}

}  // namespace ember::data::detail
