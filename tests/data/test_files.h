// Helpers for the data tests: scratch paths under $TEST_TMPDIR, and writers for the small IDX,
// gzip and CIFAR files the reader tests build byte by byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::data::testing {

// A fresh directory $TEST_TMPDIR/<name> (emptied if it exists).
std::string scratch_dir(const std::string& name);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);
// One gzip member holding `bytes`.
std::vector<uint8_t> gzip(const std::vector<uint8_t>& bytes);
// An IDX file: 00 00 <type> <dims.size()>, the dims big-endian, then `payload`.
std::vector<uint8_t> idx_file(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& payload,
                              uint8_t type = 0x08);
// `count` CIFAR records: the label bytes of record n are labels(n), the pixels are (n + k) % 251.
std::vector<uint8_t> cifar_records(int count, int label_bytes, uint8_t first_label = 0);
// The pixel byte k of record n written by cifar_records.
inline uint8_t cifar_pixel(int n, int k) { return static_cast<uint8_t>((n + k) % 251); }

// Interleaved pixels (width * height * channels) that compress like a photo: smooth gradients and
// soft blobs with a little texture, a pure function of the seed.
std::vector<uint8_t> photo_pixels(int64_t width, int64_t height, int channels, uint64_t seed);

}  // namespace ember::data::testing
