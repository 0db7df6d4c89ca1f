// The Ember side of tools/golden/check_safetensors_interop.py: `write PATH` writes one tensor
// per dtype with the reference pattern; `read PATH` checks a file written by PyTorch.
#include <cstdio>
#include <string>

#include "core/ember_core.h"
#include "core/io/safetensors.h"

using namespace ember;

namespace {

// Element i is (i * 7 % 23) - 11 in the dtype (+11 for uint8; i % 3 == 0 for bool).
Tensor pattern(const Shape& shape, DType dtype) {
  int64_t n = shape_numel(shape);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    double x = static_cast<double>(i * 7 % 23 - 11);
    if (dtype == kUInt8) x += 11;
    if (dtype == kBool) x = (i % 3 == 0) ? 1 : 0;
    v[i] = x;
  }
  return tensor(v, shape).to(dtype);
}

const std::pair<const char*, DType> kDtypes[] = {{"f32", kFloat32}, {"f64", kFloat64}, {"bf16", kBFloat16},
                                                 {"f16", kFloat16}, {"i64", kInt64},   {"i32", kInt32},
                                                 {"u8", kUInt8},    {"bool", kBool}};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s write|read PATH\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1], path = argv[2];
  if (mode == "write") {
    NamedTensors tensors;
    for (auto [name, dtype] : kDtypes) tensors.emplace_back(name, pattern({3, 4}, dtype));
    save_safetensors(path, tensors, {{"written_by", "ember"}});
    return 0;
  }
  SafetensorsFile file = load_safetensors(path);
  for (auto [name, dtype] : kDtypes) {
    const Tensor& t = file.at(name);
    Tensor expected = pattern(t.sizes(), dtype);
    int64_t equal = (t.to(kFloat64) == expected.to(kFloat64)).to(kInt64).sum().item<int64_t>();
    if (t.dtype() != dtype || equal != t.numel()) {
      std::fprintf(stderr, "tensor %s differs\n", name);
      return 1;
    }
  }
  std::printf("Ember read PyTorch's file: %zu tensors, all values equal\n", file.tensors.size());
  return 0;
}
