// EMBER_CPU_ISA (core/cpu/isa.h): the cap reaches Ember's kernels, oneDNN and the kernel cache's
// name. The same cases run with no cap (isa_test), capped to AVX2 (isa_avx2_test) and with a bad
// value (isa_malformed_test, only the [malformed] case).
#include <dnnl.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/cpu/avx2_tile.h"
#include "core/cpu/conv/direct_conv.h"
#include "core/cpu/isa.h"
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
