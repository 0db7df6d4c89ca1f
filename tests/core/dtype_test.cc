// DTypes: sizes and names, PyTorch's promotion between tensors, 0-dim tensors and scalars, and
// bit-exact float16/bfloat16 rounding (to nearest even, subnormals, overflow, NaN).
#include <cmath>
#include <cstring>
#include <limits>

#include <catch2/catch.hpp>

#include "core/ember_core.h"

using namespace ember;

namespace {

float from_bits(uint32_t word) {
  float f;
  std::memcpy(&f, &word, sizeof(f));
  return f;
}

}  // namespace

TEST_CASE("dtype sizes, names and categories") {
  const DType all[] = {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8, kBool};
  const size_t sizes[] = {4, 8, 2, 2, 8, 4, 1, 1};
  const char* names[] = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"};
  for (int i = 0; i < kNumDTypes; ++i) {
    CHECK(element_size(all[i]) == sizes[i]);
    CHECK(std::string(dtype_name(all[i])) == names[i]);
    CHECK(is_floating(all[i]) == (i < 4));
    CHECK(is_integral(all[i]) == (i >= 4));
  }
  CHECK(zeros({3}, kInt32).element_size() == 4);
  CHECK(zeros({3}, kInt32).nbytes() == 12);
}

TEST_CASE("tensor-tensor promotion follows PyTorch") {
  CHECK(promote_types(kFloat32, kFloat64) == kFloat64);
  CHECK(promote_types(kBFloat16, kFloat16) == kFloat32);
  CHECK(promote_types(kFloat16, kFloat32) == kFloat32);
  CHECK(promote_types(kInt32, kFloat16) == kFloat16);
  CHECK(promote_types(kInt64, kBFloat16) == kBFloat16);
  CHECK(promote_types(kUInt8, kInt32) == kInt32);
  CHECK(promote_types(kUInt8, kBool) == kUInt8);
  CHECK(promote_types(kBool, kBool) == kBool);
  CHECK(promote_types(kInt64, kInt32) == kInt64);
  for (DType a : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8, kBool})
    for (DType b : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8, kBool})
      CHECK(promote_types(a, b) == promote_types(b, a));
  CHECK((zeros({2}, kInt32) + zeros({2}, kFloat16)).dtype() == kFloat16);
  CHECK((zeros({2}, kUInt8) * zeros({2}, kInt64)).dtype() == kInt64);
}

TEST_CASE("0-dim tensors and scalars only lift the category") {
  Tensor f16 = zeros({2}, kFloat16), i32 = zeros({2}, kInt32), b = zeros({2}, kBool);
  CHECK(result_type(f16, full({}, 1.0, kFloat64)) == kFloat16);  // same category: dimensioned wins
  CHECK(result_type(i32, full({}, 1.0, kFloat64)) == kFloat64);  // higher category: its own dtype
  CHECK(result_type(i32, full({}, 1, kInt64)) == kInt32);
  CHECK(result_type(full({}, 1, kInt64), full({}, 1, kInt32)) == kInt64);  // both 0-dim: ordinary promotion
  CHECK(result_type(i32, Scalar(2.5)) == kFloat32);                        // a float scalar brings float32
  CHECK(result_type(i32, Scalar(7)) == kInt32);
  CHECK(result_type(b, Scalar(7)) == kInt64);
  CHECK(result_type(b, Scalar(true)) == kBool);
  CHECK(result_type(f16, Scalar(1e10)) == kFloat16);
  CHECK(result_type(full({}, 1, kInt32), Scalar(2.5)) == kFloat32);
  CHECK((i32 + 2.5).dtype() == kFloat32);
  CHECK((f16 * 3).dtype() == kFloat16);
  CHECK((2 - zeros({2}, kUInt8)).dtype() == kUInt8);
  CHECK((b + 1).dtype() == kInt64);
}

TEST_CASE("float16 conversion rounds to nearest even and handles the edges") {
  CHECK(Half(1.0f).bits == 0x3c00);
  CHECK(Half(-2.0f).bits == 0xc000);
  CHECK(Half(65504.0f).bits == 0x7bff);  // the largest finite value
  CHECK(Half(65519.99f).bits == 0x7bff);
  CHECK(Half(65520.0f).bits == 0x7c00);  // halfway to 2^16: ties to inf
  CHECK(Half(1e6f).bits == 0x7c00);
  CHECK(Half(-INFINITY).bits == 0xfc00);
  CHECK(std::isnan(static_cast<float>(Half(NAN))));
  CHECK(Half(1.0f + 1.0f / 2048).bits == 0x3c00);     // tie, even stays
  CHECK(Half(1.0f + 3.0f / 2048).bits == 0x3c02);     // tie, odd rounds up
  CHECK(Half(std::ldexp(1.0f, -24)).bits == 0x0001);  // the smallest subnormal
  CHECK(Half(std::ldexp(1.0f, -25)).bits == 0x0000);  // tie with zero: even
  CHECK(Half(std::ldexp(1.5f, -25)).bits == 0x0001);
  CHECK(Half(std::ldexp(1.0f, -14)).bits == 0x0400);  // the smallest normal
  CHECK(Half(-0.0f).bits == 0x8000);
  for (uint32_t bits = 0; bits < 0x7c00; bits += 7) {  // every finite value survives a round trip
    Half h;
    h.bits = static_cast<uint16_t>(bits);
    REQUIRE(Half(static_cast<float>(h)).bits == bits);
  }
  CHECK(static_cast<float>(Half(std::ldexp(1.0f, -24))) == std::ldexp(1.0f, -24));
}

TEST_CASE("bfloat16 conversion rounds to nearest even and keeps NaN") {
  CHECK(BFloat16(1.0f).bits == 0x3f80);
  CHECK(BFloat16(from_bits(0x3f808000)).bits == 0x3f80);  // tie, even stays
  CHECK(BFloat16(from_bits(0x3f818000)).bits == 0x3f82);  // tie, odd rounds up
  CHECK(BFloat16(from_bits(0x3f808001)).bits == 0x3f81);
  CHECK(BFloat16(std::numeric_limits<float>::max()).bits == 0x7f80);  // rounds up to inf
  CHECK(BFloat16(INFINITY).bits == 0x7f80);
  CHECK(std::isnan(static_cast<float>(BFloat16(NAN))));
  CHECK(std::isnan(static_cast<float>(BFloat16(from_bits(0x7f800001)))));  // a NaN that truncates to inf
  CHECK(static_cast<float>(BFloat16(3.140625f)) == 3.140625f);
  CHECK(BFloat16(from_bits(0x00010000)).bits == 0x0001);  // subnormals survive
}

TEST_CASE("to(dtype) on tensors rounds like the scalar types") {
  Tensor x = tensor({1.0f + 1.0f / 2048, 65520.0f, 1.0f + 3.0f / 256});
  auto h = x.to(kFloat16).to_vector<float>();
  CHECK(h[0] == 1.0f);
  CHECK(std::isinf(h[1]));
  auto b = x.to(kBFloat16).to_vector<float>();
  CHECK(b[2] == 1.0f + 4.0f / 256);
  CHECK(tensor({2.9, -2.9}).to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{2, -2});  // toward zero
  CHECK(tensor<int64_t>({3, 0}).to(kBool).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(tensor<int32_t>({300}).to(kUInt8).item<int64_t>() == 44);  // integers wrap
  CHECK(x.to(kFloat32).is_same(x));                                // same dtype: no copy
}
