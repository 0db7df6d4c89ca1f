// Files that survive crashes: write_file_atomic writes a temporary file in the target's
// directory, fsyncs it, renames it over the target and fsyncs the directory, so a reader sees
// the old file or the new one, never a torn one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes);
// Reads a whole file; errors name the path and the reason (missing, unreadable, too large).
std::vector<uint8_t> read_file(const std::string& path);

}  // namespace ember
