// The core op table (tests/core/op_cases.h) on cuda:0: every case that the kernels of the CUDA
// backend serve, on random shapes, views and dtypes, against the float64 reference; the same
// list the CPU runs. matmul waits for the GEMM kernels (the neural-net issue).
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "cuda/api.h"
#include "tests/core/op_cases.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kCuda0 = Device::cuda(0);

void check_family(const std::vector<OpCase>& cases, const std::set<std::string>& skip = {}) {
  REQUIRE(cuda::device_count() >= 1);
  for (const OpCase& c : cases) {
    if (skip.count(c.name)) continue;
    INFO("case " << c.name);
    for (const std::string& failure : check_op_case(c, kCuda0)) FAIL_CHECK(failure);
  }
}

}  // namespace

TEST_CASE("unary ops on cuda:0 match the float64 reference") { check_family(unary_cases()); }
TEST_CASE("binary ops, comparisons and where on cuda:0 match the float64 reference") {
  check_family(binary_cases());
}
TEST_CASE("reductions on cuda:0 match the float64 reference") { check_family(reduction_cases()); }
TEST_CASE("conversions and in-place ops on cuda:0 match the float64 reference") { check_family(copy_cases()); }
TEST_CASE("cat, stack, split and chunk on cuda:0 match the float64 reference") {
  std::set<std::string> matmul;
  for (const OpCase& c : structural_cases())
    if (c.name.find("matmul") != std::string::npos || c.name.find("mm") != std::string::npos) matmul.insert(c.name);
  check_family(structural_cases(), matmul);
}

TEST_CASE("large inputs on cuda:0 take many blocks and block-per-output reductions") {
  const std::set<std::string> chosen = {"exp", "add", "where", "lt", "sum", "mean", "amax", "norm_pinf",
                                        "var_unbiased", "max_dim", "argmin_flat", "to_float32", "add_"};
  std::vector<OpCase> cases;
  for (OpCase& c : all_op_cases())
    if (chosen.count(c.name)) cases.push_back(std::move(c));
  REQUIRE(cases.size() == chosen.size());
  HarnessOptions options;
  options.large = true;
  options.trials = 2;
  options.only_dtypes = {kFloat32, kInt32};
  for (const OpCase& c : cases) {
    INFO("case " << c.name);
    for (const std::string& failure : check_op_case(c, kCuda0, options)) FAIL_CHECK(failure);
  }
}
