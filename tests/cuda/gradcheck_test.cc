// The gradient-check table (tests/autograd) on cuda:0, for the families whose forward and
// backward run on this kernels: analytic gradients from the CUDA graph against central
// finite differences, the same cases the CPU runs. matmul, linear, conv, pooling, norms, softmax,
// losses, embedding and indexing wait for the neural-net kernels (GEMM, conv, gather...).
#include <catch2/catch.hpp>

#include <iterator>
#include <string>

#include "cuda/api.h"
#include "tests/autograd/gradcheck.h"

namespace ember::testing {
namespace {

const char* const kFamilies[] = {"unary", "binary", "where", "inplace", "reduce", "view", "cat", "stack", "copy"};

TEST_CASE("gradcheck on cuda:0: the elementwise, reduction, view and copy families", "[gradcheck]") {
  REQUIRE(cuda::device_count() >= 1);
  const std::string family = GENERATE(from_range(std::begin(kFamilies), std::end(kFamilies)));
  INFO("family " << family);
  int run = 0;
  for (const GradCase& c : grad_cases()) {
    if (c.name.rfind(family + ".", 0) != 0 && c.name != family) continue;
    if (c.name.find("matmul") != std::string::npos) continue;  // GEMM: the neural-net kernels
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
