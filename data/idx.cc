// IDX header parsing and validation; the payload becomes a tensor without another copy.
#include "data/idx.h"

#include <cstdio>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "data/gzip.h"

namespace ember::data {

namespace {

constexpr uint8_t kUnsignedByte = 0x08;

uint32_t read_be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

std::string hex32(uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08X", value);
  return text;
}

}  // namespace

Tensor read_idx(const std::string& path, int expected_dims) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(read_file_maybe_gzip(path));
  const std::vector<uint8_t>& b = *bytes;
  EMBER_CHECK(b.size() >= 4, "read_idx: '", path, "': truncated data: ", b.size(),
              " bytes, shorter than the 4-byte IDX magic number");
  uint32_t magic = read_be32(b.data());
  EMBER_CHECK(b[0] == 0 && b[1] == 0 && b[2] == kUnsignedByte, "read_idx: '", path, "': wrong magic number ",
              hex32(magic), ", expected 0x000008NN (two zero bytes, type 0x08 = unsigned byte, NN = dim count)");
  int dims = b[3];
  if (expected_dims >= 0) {
    EMBER_CHECK(dims == expected_dims, "read_idx: '", path, "': wrong dimension count: the header (magic ",
                hex32(magic), ") says ", dims, " dims, expected ", expected_dims, " (magic ",
                hex32(0x800u | static_cast<uint32_t>(expected_dims)), ")");
  }
  size_t header = 4 + 4 * static_cast<size_t>(dims);
  EMBER_CHECK(b.size() >= header, "read_idx: '", path, "': truncated data: ", b.size(), " bytes, but the header of a ",
              dims, "-dim file needs ", header);
  Shape shape;
  size_t payload = 1;
  for (int d = 0; d < dims; ++d) {
    uint32_t extent = read_be32(b.data() + 4 + 4 * d);
    shape.push_back(extent);
    EMBER_CHECK(!__builtin_mul_overflow(payload, extent, &payload), "read_idx: '", path,
                "': malformed header: the dims overflow a 64-bit byte count");
  }
  size_t found = b.size() - header;
  EMBER_CHECK(found >= payload, "read_idx: '", path, "': truncated data: the header promises shape ", shape_str(shape),
              " = ", payload, " bytes of data, found ", found);
  EMBER_CHECK(found == payload, "read_idx: '", path, "': ", found - payload, " unexpected trailing bytes after the ",
              payload, " bytes of data the header promises (shape ", shape_str(shape), ")");
  // The tensor borrows the decoded buffer past the header; the deleter keeps the buffer alive.
  uint8_t* data = bytes->data() + header;
  return from_blob(data, shape, kUInt8, [bytes](void*) mutable { bytes.reset(); });
}

}  // namespace ember::data
