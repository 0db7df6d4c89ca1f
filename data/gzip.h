// Whole-file reading that undoes gzip compression when the file starts with the gzip magic bytes
// (1f 8b), so dataset readers accept both "x.gz" and the plain "x". Uses zlib.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::data {

// Decompresses every gzip member in `compressed`; errors name `path` and say what is wrong (bad
// stream, truncated stream, trailing bytes).
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& compressed, const std::string& path);

bool is_gzip(const std::vector<uint8_t>& bytes);

// read_file(path), gunzipped when it is gzip data.
std::vector<uint8_t> read_file_maybe_gzip(const std::string& path);

}  // namespace ember::data
