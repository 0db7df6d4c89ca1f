// JPEG through libjpeg-turbo's libjpeg API. libjpeg reports faults by calling error_exit, which
// must not return: it longjmps back into the step that called libjpeg. Each such step is a small
// function whose frame holds no C++ object (a longjmp would skip its destructor), and every
// buffer it fills is allocated by its caller before the call.
#include <algorithm>
#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which uses FILE and size_t without including them
#include <cstdlib>
#include <cstring>

#include <jerror.h>
#include <jpeglib.h>

#include "core/error.h"
#include "data/image_codecs.h"

namespace ember::data::detail {

namespace {

struct ErrorManager {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 32];
};

[[noreturn]] void on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  char libjpeg[JMSG_LENGTH_MAX];
  cinfo->err->format_message(cinfo, libjpeg);
  std::snprintf(err->message, sizeof err->message, "%s%s",
                cinfo->err->msg_code == JWRN_JPEG_EOF ? "truncated JPEG data: " : "", libjpeg);
  std::longjmp(err->jump, 1);
}

// libjpeg recovers from corrupt data with a warning, as PIL does, except where the data ran out:
// PIL refuses a truncated file ("image file is truncated"), so that warning is a fault here too.
void on_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) on_error(cinfo);
}

ErrorManager* install_errors(jpeg_error_mgr* pub) {
  auto* err = reinterpret_cast<ErrorManager*>(pub);
  jpeg_std_error(pub);
  pub->error_exit = on_error;
  pub->emit_message = on_message;
  err->message[0] = '\0';
  return err;
}

struct Decompressor {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  bool created = false;
  ~Decompressor() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
  [[noreturn]] void fail() const { throw Error(err.message[0] ? err.message : "libjpeg failed"); }
};

bool open_step(Decompressor* d, const uint8_t* bytes, size_t size) {
  d->cinfo.err = &install_errors(&d->err.pub)->pub;
  if (setjmp(d->err.jump)) return false;
  jpeg_create_decompress(&d->cinfo);
  d->created = true;
  jpeg_mem_src(&d->cinfo, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&d->cinfo, TRUE);
  return true;
}

// Starts decompression at 1/denom scale and narrows it to the scaled columns [*xoff, *xoff +
// *width) (libjpeg widens them to whole iMCUs and says so through the pointers) and rows from `top`.
bool start_step(Decompressor* d, J_COLOR_SPACE out, unsigned denom, JDIMENSION* xoff, JDIMENSION* width,
                JDIMENSION top) {
  if (setjmp(d->err.jump)) return false;
  d->cinfo.out_color_space = out;
  d->cinfo.scale_num = 1;
  d->cinfo.scale_denom = denom;
  jpeg_start_decompress(&d->cinfo);
  if (*xoff > 0 || *width < d->cinfo.output_width) jpeg_crop_scanline(&d->cinfo, xoff, width);
  if (top > 0 && jpeg_skip_scanlines(&d->cinfo, top) != top) ERREXIT(&d->cinfo, JERR_BAD_LENGTH);
  return true;
}

bool read_step(Decompressor* d, uint8_t* dst, size_t stride, JDIMENSION rows, bool finish) {
  if (setjmp(d->err.jump)) return false;
  JSAMPROW pointers[16];
  JDIMENSION done = 0;
  while (done < rows) {
    JDIMENSION batch = rows - done < 16 ? rows - done : 16;
    for (JDIMENSION k = 0; k < batch; ++k) pointers[k] = dst + (done + k) * stride;
    JDIMENSION got = jpeg_read_scanlines(&d->cinfo, pointers, batch);
    if (got == 0) ERREXIT(&d->cinfo, JERR_BAD_LENGTH);
    done += got;
  }
  // Reading on to the end marker checks what follows the last row; a region's decode stops early.
  if (finish) {
    jpeg_finish_decompress(&d->cinfo);
  } else {
    jpeg_abort_decompress(&d->cinfo);
  }
  return true;
}

// The position just past the first start-of-scan segment's header: markers before it (an EXIF
// thumbnail's end marker among them) are not the image's.
size_t first_scan(const uint8_t* bytes, size_t size) {
  size_t at = 2;
  while (at + 4 <= size) {
    if (bytes[at] != 0xFF) return size;
    uint8_t marker = bytes[at + 1];
    if (marker == 0xFF) {
      ++at;
      continue;
    }
    size_t length = (static_cast<size_t>(bytes[at + 2]) << 8) | bytes[at + 3];
    at += 2 + length;
    if (marker == 0xDA) return at;
  }
  return size;
}

// A file cut short has no end-of-image marker after its first scan. Checked up front so that a
// region's decode, which stops at the region's last row, refuses a truncated file as a whole
// decode does.
bool has_end_marker(const uint8_t* bytes, size_t size) {
  size_t scan = first_scan(bytes, size);
  for (size_t at = size; at >= scan + 2 && at >= 2; --at) {
    if (bytes[at - 2] == 0xFF && bytes[at - 1] == 0xD9) return true;
  }
  return false;
}

bool is_cmyk(const jpeg_decompress_struct& cinfo) {
  return cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
}

// Adobe-marked CMYK is stored inverted (Photoshop's convention, which PIL follows): the stored
// byte is 255 - ink. R = (255 - C)(255 - K) / 255 in ink terms.
void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, int64_t count, bool inverted) {
  for (int64_t i = 0; i < count; ++i, cmyk += 4, rgb += 3) {
    int c = cmyk[0], m = cmyk[1], y = cmyk[2], k = cmyk[3];
    if (!inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    rgb[0] = static_cast<uint8_t>((c * k + 127) / 255);
    rgb[1] = static_cast<uint8_t>((m * k + 127) / 255);
    rgb[2] = static_cast<uint8_t>((y * k + 127) / 255);
  }
}

}  // namespace

ImageHeader jpeg_header(const uint8_t* bytes, size_t size, const DecodeLimits& limits) {
  Decompressor d;
  if (!open_step(&d, bytes, size)) d.fail();
  ImageHeader header;
  header.format = ImageFormat::kJpeg;
  header.width = d.cinfo.image_width;
  header.height = d.cinfo.image_height;
  header.file_channels = d.cinfo.num_components;
  check_pixel_count(header.width, header.height, limits);
  return header;
}

DecodedImage jpeg_decode(const uint8_t* bytes, size_t size, const DecodeRequest& request, const DecodeLimits& limits) {
  EMBER_CHECK(has_end_marker(bytes, size), "truncated JPEG data (no end-of-image marker after the image data)");
  Decompressor d;
  if (!open_step(&d, bytes, size)) d.fail();
  const int64_t full_w = d.cinfo.image_width, full_h = d.cinfo.image_height;
  check_pixel_count(full_w, full_h, limits);

  int64_t left = 0, top = 0, width = full_w, height = full_h;
  if (request.width > 0 && request.height > 0) {
    left = std::min(std::max<int64_t>(request.left, 0), full_w - 1);
    top = std::min(std::max<int64_t>(request.top, 0), full_h - 1);
    width = std::min(request.left + request.width, full_w) - left;
    height = std::min(request.top + request.height, full_h) - top;
    EMBER_CHECK(width > 0 && height > 0, "the region ", request.width, "x", request.height, " at (", request.left, ", ",
                request.top, ") lies outside the ", full_w, "x", full_h, " image");
  }
  unsigned denom = 1;
  if (request.min_width > 0 && request.min_height > 0) {
    for (unsigned d8 : {8u, 4u, 2u}) {
      if (width >= request.min_width * d8 && height >= request.min_height * d8) {
        denom = d8;
        break;
      }
    }
  }
  const bool cmyk = is_cmyk(d.cinfo);
  J_COLOR_SPACE out = cmyk ? JCS_CMYK : request.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  const int64_t scaled_w = (full_w + denom - 1) / denom, scaled_h = (full_h + denom - 1) / denom;
  const int64_t x0 = left / denom, y0 = top / denom;
  const int64_t x1 = std::min(scaled_w, (left + width + denom - 1) / denom);
  const int64_t y1 = std::min(scaled_h, (top + height + denom - 1) / denom);
  JDIMENSION xoff = static_cast<JDIMENSION>(x0), cols = static_cast<JDIMENSION>(x1 - x0);
  if (!start_step(&d, out, denom, &xoff, &cols, static_cast<JDIMENSION>(y0))) d.fail();

  DecodedImage image;
  image.width = cols;
  image.height = y1 - y0;
  image.channels = request.channels;
  image.x0 = static_cast<double>(xoff) * denom;
  image.y0 = static_cast<double>(y0) * denom;
  image.scale = denom;
  const int components = d.cinfo.output_components;
  const bool whole = xoff == 0 && y0 == 0 && y1 == scaled_h;
  std::vector<uint8_t> rows(static_cast<size_t>(image.width * image.height * components));
  if (!read_step(&d, rows.data(), static_cast<size_t>(image.width * components), static_cast<JDIMENSION>(image.height),
                 whole)) {
    d.fail();
  }
  const int64_t pixels = image.width * image.height;
  if (cmyk) {
    image.pixels.resize(static_cast<size_t>(pixels * 3));
    cmyk_to_rgb(rows.data(), image.pixels.data(), pixels, d.cinfo.saw_Adobe_marker);
    if (request.channels == 1) {
      rgb_to_gray_in_place(image.pixels.data(), pixels);
      image.pixels.resize(static_cast<size_t>(pixels));
    }
  } else {
    image.pixels = std::move(rows);
  }
  return image;
}

namespace {

struct Compressor {
  jpeg_compress_struct cinfo;
  ErrorManager err;
  bool created = false;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  ~Compressor() {
    if (created) jpeg_destroy_compress(&cinfo);
    std::free(buffer);
  }
};

bool encode_step(Compressor* c, const uint8_t* pixels, JDIMENSION width, JDIMENSION height, int channels, int quality) {
  c->cinfo.err = &install_errors(&c->err.pub)->pub;
  if (setjmp(c->err.jump)) return false;
  jpeg_create_compress(&c->cinfo);
  c->created = true;
  jpeg_mem_dest(&c->cinfo, &c->buffer, &c->size);
  c->cinfo.image_width = width;
  c->cinfo.image_height = height;
  c->cinfo.input_components = channels;
  c->cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : channels == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&c->cinfo);
  jpeg_set_quality(&c->cinfo, quality, TRUE);
  jpeg_start_compress(&c->cinfo, TRUE);
  while (c->cinfo.next_scanline < height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels + static_cast<size_t>(c->cinfo.next_scanline) * width * channels);
    jpeg_write_scanlines(&c->cinfo, &row, 1);
  }
  jpeg_finish_compress(&c->cinfo);
  return true;
}

}  // namespace

std::vector<uint8_t> jpeg_encode(const uint8_t* pixels, int64_t width, int64_t height, int channels, int quality) {
  std::vector<uint8_t> inverted;
  if (channels == 4) {  // libjpeg writes the bytes as given with an Adobe marker: store 255 - ink
    inverted.assign(pixels, pixels + width * height * 4);
    for (uint8_t& v : inverted) v = static_cast<uint8_t>(255 - v);
    pixels = inverted.data();
  }
  Compressor c;
  if (!encode_step(&c, pixels, static_cast<JDIMENSION>(width), static_cast<JDIMENSION>(height), channels, quality)) {
    throw Error(c.err.message);
  }
  return std::vector<uint8_t>(c.buffer, c.buffer + c.size);
}

}  // namespace ember::data::detail
