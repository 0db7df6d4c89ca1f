// The per-format halves of data/image.h, internal to //data: each takes bytes already known to be
// of its format (data/image.cc tells them apart) and raises plain messages that image.cc prefixes
// with the file's name.
#pragma once

#include <cstdint>
#include <vector>

#include "data/image.h"

namespace ember::data::detail {

ImageHeader jpeg_header(const uint8_t* bytes, size_t size, const DecodeLimits& limits);
DecodedImage jpeg_decode(const uint8_t* bytes, size_t size, const DecodeRequest& request, const DecodeLimits& limits);
std::vector<uint8_t> jpeg_encode(const uint8_t* pixels, int64_t width, int64_t height, int channels, int quality);

ImageHeader png_header(const uint8_t* bytes, size_t size, const DecodeLimits& limits);
DecodedImage png_decode(const uint8_t* bytes, size_t size, const DecodeRequest& request, const DecodeLimits& limits);
std::vector<uint8_t> png_encode(const uint8_t* pixels, int64_t width, int64_t height, int channels);

// Raises unless 0 < width, height and width * height <= limits.max_pixels (a decompression bomb).
void check_pixel_count(int64_t width, int64_t height, const DecodeLimits& limits);

// Interleaved RGB rows to luma (PIL's convert("L"): (19595 R + 38470 G + 7471 B + 2^15) >> 16), in
// place: `pixels` holds `count` RGB pixels and keeps `count` gray ones at its front.
void rgb_to_gray_in_place(uint8_t* pixels, int64_t count);

// The rows [top, top + height) of a full-width interleaved image, clipped: what the formats that
// cannot decode a region return for one (only the rows are cut; x0 stays 0).
void keep_rows(DecodedImage& image, int64_t top, int64_t height);

}  // namespace ember::data::detail
