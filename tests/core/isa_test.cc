// EMBER_CPU_ISA (core/cpu/isa.h): the cap reaches Ember's kernels, oneDNN and the kernel cache's
// name. The same cases run with no cap (isa_test), capped to AVX2 (isa_avx2_test) and with a bad
// value (isa_malformed_test, only the [malformed] case); the bf16 loops' case also capped to SSE4.1
// (isa_sse41_test), where they fall back to scalar code.
#include <dnnl.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/cpu/avx2_tile.h"
#include "core/cpu/conv/direct_conv.h"
#include "core/cpu/isa.h"
#include "core/cpu/simd/kernels.h"
#include "core/ember_core.h"
#include "core/kernel_select.h"

namespace {

using namespace ember;

std::string cap() {
  const char* env = std::getenv("EMBER_CPU_ISA");
  return env == nullptr ? "" : env;
}

// dnnl_cpu_isa_t values are bit sets, each holding the bits of the ISAs below it.
bool dnnl_at_least(dnnl_cpu_isa_t isa) {
  const auto effective = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return (effective & static_cast<unsigned>(isa)) == static_cast<unsigned>(isa);
}

}  // namespace

TEST_CASE("the effective ISA is the CPU's, lowered by EMBER_CPU_ISA") {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  INFO("EMBER_CPU_ISA=" << cap() << ", effective " << cpu::isa_description());
  if (cap() == "avx2") {
    CHECK(cpu::isa() == (avx2 ? cpu::Isa::Avx2 : cpu::Isa::Sse41));
    CHECK_FALSE(cpu::has_avx512f());
    CHECK_FALSE(cpu::has_avx512_core());
    CHECK_FALSE(cpu::direct_conv_supported());
    CHECK(cpu::avx2::preferred_cpu() == avx2);
    CHECK((cpu::isa_description().find("capped") != std::string::npos) == avx512);
  } else {
    REQUIRE(cap().empty());
    CHECK(cpu::has_avx512f() == avx512);
    CHECK(cpu::has_avx2_fma() == avx2);
    CHECK(cpu::direct_conv_supported() == avx512);
    CHECK(cpu::avx2::preferred_cpu() == (avx2 && !avx512));
    CHECK(cpu::isa_description().find("capped") == std::string::npos);
  }
}

TEST_CASE("oneDNN runs under the same cap") {
  // A product through oneDNN's sgemm, so that oneDNN has fixed its ISA before it is read back.
  Tensor a = randn({37, 29}), b = randn({29, 41});
  Tensor c = matmul(a, b);
  const std::vector<double> got = c.to(kFloat64).to_vector<double>();
  const std::vector<double> expected = matmul(a.to(kFloat64), b.to(kFloat64)).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
  CHECK(worst < 1e-3);
  const bool avx512 = __builtin_cpu_supports("avx512f");
  CHECK(dnnl_at_least(dnnl_cpu_isa_avx512_core) == (avx512 && cap().empty() && cpu::has_avx512_core()));
  if (cap() == "avx2") CHECK_FALSE(dnnl_at_least(dnnl_cpu_isa_avx512_core));
}

TEST_CASE("a capped run keeps its kernel decisions in a file of its own") {
  setenv("EMBER_KERNEL_CACHE", "/tmp", 1);
  const std::string file = kernel_select::cache_file();
  unsetenv("EMBER_KERNEL_CACHE");
  const std::string here = cap();
  if (here.empty())
    setenv("EMBER_CPU_ISA", "avx2", 1);
  else
    unsetenv("EMBER_CPU_ISA");
  setenv("EMBER_KERNEL_CACHE", "/tmp", 1);
  const std::string other = kernel_select::cache_file();
  unsetenv("EMBER_KERNEL_CACHE");
  if (here.empty())
    unsetenv("EMBER_CPU_ISA");
  else
    setenv("EMBER_CPU_ISA", here.c_str(), 1);
  CHECK(file != other);
}

// The bf16 vector loops (core/cpu/simd) of the ISA in force, against scalar code: casts bit for bit
// (BFloat16::from_float's rounding, NaN, infinities, subnormals, ties), and batch norm's passes and
// a binary op on bf16 next to the same values in float32, over channel counts and plane lengths
// that leave partial vectors.
TEST_CASE("bf16 casts, batch norm and elementwise loops agree with scalar code under the cap", "[bf16]") {
  CHECK(cpu::simd::available() == cpu::has_avx2_fma());
  std::vector<float> floats;
  for (uint32_t bits : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffbfffffu,
                        0x00000001u, 0x807fffffu, 0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0x7f7f8000u}) {
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    floats.push_back(f);
  }
  const std::vector<float> noise = randn({1000}).to_vector<float>();
  for (size_t i = 0; i < noise.size(); ++i)
    floats.push_back(noise[i] * std::ldexp(1.0f, static_cast<int>(i % 60) - 30));
  const Tensor f32 = tensor(floats, {static_cast<int64_t>(floats.size())});
  const Tensor bf16 = f32.to(kBFloat16);
  const auto* got = static_cast<const BFloat16*>(bf16.data_ptr());
  for (size_t i = 0; i < floats.size(); ++i) {
    INFO("value " << i << ": " << floats[i]);
    REQUIRE(got[i].bits == BFloat16::from_float(floats[i]));
  }
  const std::vector<float> back = bf16.to(kFloat32).to_vector<float>();
  for (size_t i = 0; i < floats.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &back[i], sizeof(bits));
    REQUIRE(bits == static_cast<uint32_t>(got[i].bits) << 16);
  }

  const KernelTable& k = kernels_for(Device(kCPU), "isa_test");
  auto close = [](const Tensor& a, const Tensor& b, double tolerance) {
    const std::vector<double> x = a.to(kFloat64).contiguous().to_vector<double>();
    const std::vector<double> y = b.to(kFloat64).contiguous().to_vector<double>();
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]) / (1.0 + std::abs(y[i])));
    return worst <= tolerance;
  };
  for (const Shape& shape : {Shape{4, 37, 3, 5}, Shape{2, 3, 40, 29}, Shape{3, 16, 2, 2}}) {
    for (bool channels_last : {true, false}) {
      INFO("shape " << shape_str(shape) << (channels_last ? " channels-last" : " NCHW"));
      const Shape cl = {shape[0], shape[2], shape[3], shape[1]};
      const Tensor x = (channels_last ? randn(cl).permute({0, 3, 1, 2}) : randn(shape)).to(kBFloat16);
      const Tensor dy = (channels_last ? randn(cl).permute({0, 3, 1, 2}) : randn(shape)).to(kBFloat16);
      const Tensor x32 = x.to(kFloat32), dy32 = dy.to(kFloat32);
      const Tensor weight = randn({shape[1]}), bias = randn({shape[1]});
      auto [mean, var] = k.batch_norm_stats(x);
      auto [mean32, var32] = k.batch_norm_stats(x32);
      CHECK(mean.dtype() == kFloat32);
      CHECK(close(mean, mean32, 1e-5));
      CHECK(close(var, var32, 1e-5));
      const Tensor invstd = (var32 + 1e-5).rsqrt();
      const Tensor y = k.batch_norm_apply(x, mean32, invstd, weight, bias, true);
      const Tensor y32 = k.batch_norm_apply(x32, mean32, invstd, weight, bias, true);
      CHECK(y.dtype() == kBFloat16);
      CHECK(close(y, y32, 1.0 / 256));
      auto [sum_dy, sum_dy_xmu] = k.batch_norm_backward_reduce(dy, x, mean32, y);
      auto [sum_dy32, sum_dy_xmu32] = k.batch_norm_backward_reduce(dy32, x32, mean32, y.to(kFloat32));
      CHECK(close(sum_dy, sum_dy32, 1e-5));
      CHECK(close(sum_dy_xmu, sum_dy_xmu32, 1e-5));
      const int64_t count = x.numel() / shape[1];
      const Tensor dx = k.batch_norm_backward_input(dy, x, mean32, invstd, weight, sum_dy32, sum_dy_xmu32, count, y);
      const Tensor dx32 =
          k.batch_norm_backward_input(dy32, x32, mean32, invstd, weight, sum_dy32, sum_dy_xmu32, count, y.to(kFloat32));
      CHECK(dx.dtype() == kBFloat16);
      CHECK(close(dx, dx32, 1.0 / 128));
      CHECK(close(add_relu(x, dy), add_relu(x32, dy32).to(kBFloat16), 0.0));
    }
  }
}

TEST_CASE("an unknown EMBER_CPU_ISA is an Error at the first kernel call", "[malformed]") {
  REQUIRE(cap() == "avx1024");
  try {
    Tensor c = matmul(randn({8, 8}), randn({8, 8}));
    FAIL("matmul ran under EMBER_CPU_ISA=avx1024");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(message.find("EMBER_CPU_ISA") != std::string::npos);
    CHECK(message.find("avx512, avx2 or sse41") != std::string::npos);
    CHECK(message.find("\"avx1024\"") != std::string::npos);
  }
  CHECK_THROWS_AS(cpu::isa(), Error);  // still, on every later call
}
