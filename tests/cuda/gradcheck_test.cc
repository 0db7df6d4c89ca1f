// The gradient-check table (tests/autograd) on cuda:0: analytic gradients from the CUDA graph
// against central finite differences, the same cases the CPU runs.
#include <catch2/catch.hpp>

#include <iterator>
#include <string>

#include "cuda/api.h"
#include "tests/autograd/gradcheck.h"

namespace ember::testing {
namespace {

const char* const kFamilies[] = {
    "unary", "binary", "where", "inplace", "reduce", "view", "cat", "stack", "copy", "matmul", "linear", "conv",
    "pool", "index", "embedding", "norm", "softmax", "loss", "activation", "dropout"};

// Under AddressSanitizer the emulator runs ~15x slower: the first cases of each family still run
// every kernel family with ASan watching, within the test's time limit; the plain build runs all.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kCasesPerFamily = 2;
#else
constexpr int kCasesPerFamily = 1 << 30;
#endif

TEST_CASE("gradcheck on cuda:0: every family of the table", "[gradcheck]") {
  REQUIRE(cuda::device_count() >= 1);
  const std::string family = GENERATE(from_range(std::begin(kFamilies), std::end(kFamilies)));
  INFO("family " << family);
  int run = 0;
  for (const GradCase& c : grad_cases()) {
    if (c.name.rfind(family + ".", 0) != 0 && c.name != family) continue;
    if (run == kCasesPerFamily) break;
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
