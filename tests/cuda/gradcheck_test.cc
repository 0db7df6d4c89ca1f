// The gradient-check table (tests/autograd) on cuda:0: analytic gradients from the CUDA graph
// against central finite differences, the same cases the CPU runs.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <iterator>
#include <string>

#include "cuda/api.h"
#include "tests/autograd/gradcheck.h"

namespace ember::testing {
namespace {

const char* const kFamilies[] = {
    "unary", "binary", "where", "inplace", "reduce", "view", "cat", "stack", "copy", "matmul", "linear", "conv",
    "pool", "index", "embedding", "norm", "softmax", "loss", "activation", "dropout"};

// Under AddressSanitizer the emulator runs ~15x slower, and in its delay mode (EMBER_EMU_DELAY=1)
// every queued operation is held back: the first cases of each family still run every kernel
// family with ASan or the delays in force, within the test's time limit. The plain run runs all.
int cases_per_family() {
#if defined(__SANITIZE_ADDRESS__)
  return 2;
#else
  const char* delay = std::getenv("EMBER_EMU_DELAY");
  return delay != nullptr && *delay != '\0' && *delay != '0' ? 2 : 1 << 30;
#endif
}

TEST_CASE("gradcheck on cuda:0: every family of the table", "[gradcheck]") {
  REQUIRE(cuda::device_count() >= 1);
  const std::string family = GENERATE(from_range(std::begin(kFamilies), std::end(kFamilies)));
  INFO("family " << family);
  int run = 0;
  for (const GradCase& c : grad_cases()) {
    if (c.name.rfind(family + ".", 0) != 0 && c.name != family) continue;
    if (run == cases_per_family()) break;
    ++run;
    INFO("case " << c.name);
    GradCheckResult result = gradcheck(c, Device::cuda(0));
    INFO(result.message);
    CHECK(result.ok);
  }
  REQUIRE(run > 0);
}

}  // namespace
}  // namespace ember::testing
