// The IDX file format of MNIST-style datasets, gzip'd or plain: a big-endian header (two zero
// bytes, a type code, the dim count, then each dim as a uint32) followed by the elements.
// Only unsigned-byte data (type 0x08) exists in the MNIST family, so only that is read.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace ember::data {

// Reads an unsigned-byte IDX file into a uint8 tensor of the header's shape. `expected_dims`
// (when >= 0) is the dim count the caller needs. Errors name the path and the problem: missing
// file, wrong magic number, wrong dimension count, truncated data, trailing bytes, bad gzip stream.
Tensor read_idx(const std::string& path, int expected_dims = -1);

}  // namespace ember::data
