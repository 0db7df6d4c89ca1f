// A file written by PyTorch's `safetensors` package (tools/golden/make_safetensors_reference.py)
// reads back with every dtype, shape and value intact, and Ember's own files carry the same bytes
// layout (header aligned to 8, data in declaration order).
#include <catch2/catch.hpp>

#include "core/ember_core.h"
#include "core/io/safetensors.h"

using namespace ember;

namespace {
// The script's pattern: (i * 7 % 23) - 11 (+11 for uint8), i % 3 == 0 for bool.
double pattern(int64_t i, DType dtype) {
  if (dtype == kBool) return i % 3 == 0 ? 1.0 : 0.0;
  double v = static_cast<double>(i * 7 % 23 - 11);
  return dtype == kUInt8 ? v + 11 : v;
}
}  // namespace

TEST_CASE("a file written by PyTorch's safetensors reads back exactly", "[golden][safetensors]") {
  SafetensorsFile file = load_safetensors("tests/golden/written_by_pytorch.safetensors");
  REQUIRE(file.metadata.at("written_by") == "safetensors.torch");
  struct Expect {
    const char* name;
    DType dtype;
    Shape shape;
  };
  const Expect expected[] = {{"f32", kFloat32, {3, 4}},  {"f64", kFloat64, {2, 3, 2}}, {"bf16", kBFloat16, {5}},
                             {"f16", kFloat16, {2, 2}},  {"i64", kInt64, {7}},         {"i32", kInt32, {1, 6}},
                             {"u8", kUInt8, {4}},        {"bool", kBool, {3, 2}},      {"scalar", kFloat32, {}},
                             {"empty", kFloat32, {0, 3}}};
  REQUIRE(file.tensors.size() == std::size(expected));
  for (const Expect& e : expected) {
    INFO("tensor " << e.name);
    const Tensor& t = file.at(e.name);
    REQUIRE(t.dtype() == e.dtype);
    REQUIRE(t.sizes() == e.shape);
    std::vector<double> values = t.to_vector<double>();
    for (size_t i = 0; i < values.size(); ++i) REQUIRE(values[i] == pattern(static_cast<int64_t>(i), e.dtype));
  }
}
