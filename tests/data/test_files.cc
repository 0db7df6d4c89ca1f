// Writers for the hand-built test files: IDX headers, gzip members (zlib deflate), CIFAR records.
#include "tests/data/test_files.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace ember::data::testing {

std::string scratch_dir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  std::filesystem::path dir = std::filesystem::path(root ? root : "/tmp") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("write_bytes: cannot write " + path);
}

std::vector<uint8_t> gzip(const std::vector<uint8_t>& bytes) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("gzip: deflateInit2 failed");
  }
  std::vector<uint8_t> out(deflateBound(&stream, bytes.size()) + 64);
  stream.next_in = const_cast<Bytef*>(bytes.data());
  stream.avail_in = static_cast<uInt>(bytes.size());
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  int status = deflate(&stream, Z_FINISH);
  deflateEnd(&stream);
  if (status != Z_STREAM_END) throw std::runtime_error("gzip: deflate did not finish");
  out.resize(stream.total_out);
  return out;
}

std::vector<uint8_t> idx_file(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& payload, uint8_t type) {
  std::vector<uint8_t> out = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(d >> shift));
  }
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::vector<uint8_t> cifar_records(int count, int label_bytes, uint8_t first_label) {
  std::vector<uint8_t> out;
  for (int n = 0; n < count; ++n) {
    for (int k = 0; k < label_bytes; ++k) out.push_back(static_cast<uint8_t>(first_label + n + k));
    for (int k = 0; k < 3072; ++k) out.push_back(cifar_pixel(n, k));
  }
  return out;
}

std::vector<uint8_t> photo_pixels(int64_t width, int64_t height, int channels, uint64_t seed) {
  std::vector<uint8_t> out(static_cast<size_t>(width * height * channels));
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&] {  // xorshift64*
    state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
    return static_cast<double>((state * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
  };
  double cx[4], cy[4], radius[4], tint[4][4];
  for (int b = 0; b < 4; ++b) {
    cx[b] = next() * static_cast<double>(width), cy[b] = next() * static_cast<double>(height);
    radius[b] = (0.1 + 0.3 * next()) * static_cast<double>(std::max(width, height));
    for (int c = 0; c < 4; ++c) tint[b][c] = 120.0 * (next() - 0.5);
  }
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        double v = 60.0 + 120.0 * static_cast<double>(x + (c + 1) * y) / static_cast<double>(width + 4 * height);
        for (int b = 0; b < 4; ++b) {
          const double dx = static_cast<double>(x) - cx[b], dy = static_cast<double>(y) - cy[b];
          v += tint[b][c] * std::exp(-(dx * dx + dy * dy) / (radius[b] * radius[b]));
        }
        v += 12.0 * (next() - 0.5);
        out[static_cast<size_t>((y * width + x) * channels + c)] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return out;
}

}  // namespace ember::data::testing
