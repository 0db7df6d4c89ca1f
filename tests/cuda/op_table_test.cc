// The core op table (tests/core/op_cases.h) on cuda:0: every case that the kernels of the CUDA
// backend serve, on random shapes, views and dtypes, against the float64 reference; the same
// list the CPU runs.
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "cuda/api.h"
#include "cuda/conv.h"
#include "tests/core/op_cases.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kCuda0 = Device::cuda(0);

// Under AddressSanitizer the emulator runs ~15 times slower: fewer random trials per dtype still
// reach every kernel and layout variant with ASan watching, within the test's time limit; the
// plain build runs the full count.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

HarnessOptions default_options() {
  HarnessOptions options;
  options.trials = kSanitized ? 4 : 10;
  return options;
}

void check_family(const std::vector<OpCase>& cases, const std::set<std::string>& skip = {}) {
  REQUIRE(cuda::device_count() >= 1);
  for (const OpCase& c : cases) {
    if (skip.count(c.name)) continue;
    INFO("case " << c.name);
    for (const std::string& failure : check_op_case(c, kCuda0, default_options())) FAIL_CHECK(failure);
  }
}

}  // namespace

TEST_CASE("unary ops on cuda:0 match the float64 reference") { check_family(unary_cases()); }
TEST_CASE("binary ops, comparisons and where on cuda:0 match the float64 reference") {
  check_family(binary_cases());
}
TEST_CASE("reductions on cuda:0 match the float64 reference") { check_family(reduction_cases()); }
TEST_CASE("conversions and in-place ops on cuda:0 match the float64 reference") { check_family(copy_cases()); }
TEST_CASE("matmul, cat, stack, split and chunk on cuda:0 match the float64 reference") {
  check_family(structural_cases());
}

TEST_CASE("pooling on cuda:0 matches the float64 reference") { check_family(pool_cases()); }
TEST_CASE("gather, scatter_add and embedding on cuda:0 match the float64 reference") { check_family(index_cases()); }
TEST_CASE("batch norm and softmax on cuda:0 match the float64 reference") { check_family(normalization_cases()); }
TEST_CASE("conv2d on cuda:0 matches the float64 reference") {
  // Float32 is held to 1e-5 relative: cuDNN's TF32 (on by default, on real GPUs) would round the
  // inputs to 10 mantissa bits.
  cuda::set_cudnn_allow_tf32(false);
  check_family(conv_cases());
  cuda::set_cudnn_allow_tf32(true);
}

TEST_CASE("linear, layer_norm, losses, dropout and set_grad on cuda:0 match the float64 reference") {
  check_family(functional_cases());
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
  options.trials = kSanitized ? 1 : 2;
  options.only_dtypes = kSanitized ? std::vector<DType>{kFloat32} : std::vector<DType>{kFloat32, kInt32};
  for (const OpCase& c : cases) {
    INFO("case " << c.name);
    for (const std::string& failure : check_op_case(c, kCuda0, options)) FAIL_CHECK(failure);
  }
}
