// The safetensors format (what PyTorch's `safetensors` package reads and writes): an 8-byte
// little-endian header length, a JSON header {"name": {"dtype", "shape", "data_offsets"}, ...,
// "__metadata__": {str: str}}, then the raw little-endian bytes. Loading never executes
// anything and validates every offset against the file before touching data.
//
//   ember::save_safetensors("model.safetensors", {{"fc.weight", w}, {"fc.bias", b}});
//   auto file = ember::load_safetensors("model.safetensors");   // file.tensors["fc.weight"]
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  NamedTensors tensors;  // in file order of their data
  std::map<std::string, std::string> metadata;
  const Tensor* find(const std::string& name) const;
  const Tensor& at(const std::string& name) const;  // raises naming the missing key
};

std::vector<uint8_t> serialize_safetensors(const NamedTensors& tensors,
                                           const std::map<std::string, std::string>& metadata = {});
// Written atomically (see file_io.h).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// `source` names the data in error messages. Tensors are copied out (CPU).
SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& source);
SafetensorsFile load_safetensors(const std::string& path);

}  // namespace ember
