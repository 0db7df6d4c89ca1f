// One driver over every backend: the op table (tests/core/op_cases.h) against its float64
// reference and the gradient checks (tests/autograd/gradcheck.h) against finite differences, on
// the CPU and then on each CUDA device (tests/backends/backends.h). Every failure names its
// backend. The harnesses' own tests are in harness_self_test.cc.
#include <algorithm>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "core/cpu/thread_pool.h"
#include "cuda/api.h"
#include "tests/autograd/gradcheck.h"
#include "tests/backends/backends.h"
#include "tests/core/op_cases.h"

using namespace ember;
using namespace ember::test;

namespace {

// The op table's cases on every backend, each with its own trial count and skip list.
void check_family(const std::vector<OpCase>& cases, bool exact_float32 = false) {
  for (const Backend& backend : all_backends()) {
    INFO("backend " << backend.device.str());
    HarnessOptions options;
    options.trials = backend.op_trials;
    if (exact_float32 && backend.allow_tf32) backend.allow_tf32(false);
    for (const OpCase& c : cases) {
      if (backend.skip.count(c.name)) continue;
      INFO("case " << c.name);
      for (const std::string& failure : check_op_case(c, backend.device, options))
        FAIL_CHECK(backend.device.str() << ": " << failure);
    }
    if (exact_float32 && backend.allow_tf32) backend.allow_tf32(true);
  }
}

// The gradient-check cases of one family ("unary" takes "unary.*") on every backend.
void check_grad_family(const std::string& family) {
  for (const Backend& backend : all_backends()) {
    INFO("backend " << backend.device.str());
    int run = 0;
    for (const testing::GradCase& c : testing::grad_cases()) {
      if (c.name.rfind(family + ".", 0) != 0 && c.name != family) continue;
      if (run == backend.grad_cases_per_family) break;
      ++run;
      INFO("case " << c.name);
      testing::GradCheckResult result = testing::gradcheck(c, backend.device);
      INFO(backend.device.str() << ": " << result.message);
      CHECK(result.ok);
    }
    REQUIRE(run > 0);
  }
}

// Each backend's chosen cases of `group` on large inputs, with its own trials, dtypes and threads.
void check_large(const std::set<std::string>& group) {
  for (const Backend& backend : all_backends()) {
    INFO("backend " << backend.device.str());
    const int threads_before = cpu::num_threads();
    if (backend.large_threads > 0) cpu::set_num_threads(backend.large_threads);
    for (const OpCase& c : all_op_cases()) {
      if (!group.count(c.name) || !backend.large_cases.count(c.name)) continue;
      INFO("case " << c.name);
      for (const std::string& failure : check_op_case(c, backend.device, backend.large))
        FAIL_CHECK(backend.device.str() << ": " << failure);
    }
    cpu::set_num_threads(threads_before);
  }
}

// The cases of `cases` whose names start with `prefix` and contain one of `parts` (none: any),
// as `keep` says: a family split in test cases, which shards run side by side.
std::vector<OpCase> named(std::vector<OpCase> cases, const std::string& prefix, const std::vector<std::string>& parts,
                          bool keep) {
  std::vector<OpCase> chosen;
  for (OpCase& c : cases) {
    bool match = c.name.rfind(prefix, 0) == 0;
    if (match && !parts.empty())
      match = std::any_of(parts.begin(), parts.end(),
                          [&](const std::string& part) { return c.name.find(part) != std::string::npos; });
    if (match == keep) chosen.push_back(std::move(c));
  }
  return chosen;
}

// The normalization family's batch norm cases.
std::vector<OpCase> with_batch_norm() { return named(normalization_cases(), "batch_norm", {}, true); }

// The large-input cases in groups, each its own test case (large max_dim alone takes as long as
// a whole shard). Every case a backend chooses must be in one.
const std::vector<std::set<std::string>> kLargeGroups = {
    {"exp", "abs", "clamp", "add", "where", "lt", "to_float32", "copy_from_int32", "add_", "matmul", "cat_2", "sum",
     "mean", "amax", "norm_pinf", "logsumexp"},
    {"var_unbiased"},
    {"max_dim"},
    {"argmin_flat"},
};

// The families of the gradient-check table that the driver runs, filled as the test cases below
// are defined.
std::set<std::string>& driven_families() {
  static std::set<std::string> families;
  return families;
}

}  // namespace

// One test case per family of the gradient-check table ("unary" takes "unary.*"), so that shards
// split them.
#define EMBER_CONCAT_IMPL(a, b) a##b
#define EMBER_CONCAT(a, b) EMBER_CONCAT_IMPL(a, b)
#define EMBER_GRADCHECK_FAMILY(family)                                                                                 \
  [[maybe_unused]] static const bool EMBER_CONCAT(family_driven_, __LINE__) = driven_families().insert(family).second; \
  TEST_CASE("backend_ops: gradcheck of the " family " family", "[gradcheck]") { check_grad_family(family); }

// The test cases in about the order of their time, longest first (emulated cuda:0 in delay mode:
// large max_dim ~30 s, batch norm ~30 s in two halves, binary ~12 s, ...; under ASan the CPU's
// batch norm too): the shards (tests/catch_session.cc) take every 6th, so each of the rounds below
// gives each shard one test case, the longest ones apart.

// Round 1.
TEST_CASE("backend_ops: batch norm, train and eval, matches the float64 reference") {
  check_family(named(with_batch_norm(), "", {"stats", "backward"}, false));
}
TEST_CASE("backend_ops: large inputs: max along a dim") { check_large(kLargeGroups[2]); }
TEST_CASE("backend_ops: batch norm's statistics and backward match the float64 reference") {
  check_family(named(with_batch_norm(), "", {"stats", "backward"}, true));
}
TEST_CASE("backend_ops: binary ops, comparisons and where match the float64 reference") {
  check_family(binary_cases());
}
TEST_CASE("backend_ops: conversions and in-place ops match the float64 reference") { check_family(copy_cases()); }
TEST_CASE("backend_ops: unary ops match the float64 reference") { check_family(unary_cases()); }

// Round 2.
// The CUDA runtime must report a device (the target sets EMBER_EMULATED_GPUS=1; its _gpu twin
// runs on GPU hosts): the CPU alone would pass every case below.
TEST_CASE("backend_ops: the CPU and every CUDA device are backends") {
  REQUIRE(cuda::device_count() >= 1);
  REQUIRE(all_backends().size() == 1 + static_cast<size_t>(cuda::device_count()));
  CHECK(all_backends()[0].device.is_cpu());
}
TEST_CASE("backend_ops: large inputs: variance along dims") { check_large(kLargeGroups[1]); }
TEST_CASE("backend_ops: linear, layer_norm, losses, dropout and set_grad match the float64 reference") {
  check_family(functional_cases());
}
TEST_CASE("backend_ops: reductions match the float64 reference") { check_family(reduction_cases()); }
EMBER_GRADCHECK_FAMILY("conv")
TEST_CASE("backend_ops: softmax and log-softmax match the float64 reference") {
  check_family(named(normalization_cases(), "batch_norm", {}, false));
}

// Round 3.
TEST_CASE("backend_ops: large inputs: argmin") { check_large(kLargeGroups[3]); }
TEST_CASE("backend_ops: every large-input case of every backend is in one group, and in the table") {
  std::set<std::string> names;
  for (const OpCase& c : all_op_cases()) names.insert(c.name);
  for (const Backend& backend : all_backends())
    for (const std::string& name : backend.large_cases) {
      INFO(backend.device.str() << ": " << name);
      CHECK(names.count(name) == 1);
      int groups = 0;
      for (const std::set<std::string>& group : kLargeGroups) groups += static_cast<int>(group.count(name));
      CHECK(groups == 1);
    }
}
TEST_CASE("backend_ops: matmul, cat, stack, split and chunk match the float64 reference") {
  check_family(structural_cases());
}
TEST_CASE("backend_ops: gather, scatter_add and embedding match the float64 reference") { check_family(index_cases()); }
EMBER_GRADCHECK_FAMILY("norm")
TEST_CASE("backend_ops: pooling matches the float64 reference") { check_family(pool_cases()); }

// Round 4.
// Float32 is held to 1e-5 relative: TF32 is switched off where a backend has it.
TEST_CASE("backend_ops: conv2d matches the float64 reference") { check_family(conv_cases(), true); }
TEST_CASE("backend_ops: every gradcheck case belongs to a family that runs, and names are unique", "[gradcheck]") {
  std::set<std::string> names;
  for (const testing::GradCase& c : testing::grad_cases()) {
    INFO(c.name);
    CHECK(names.insert(c.name).second);
    bool known = false;
    for (const std::string& family : driven_families())
      known = known || c.name == family || c.name.rfind(family + ".", 0) == 0;
    CHECK(known);
  }
}
EMBER_GRADCHECK_FAMILY("view")
TEST_CASE("backend_ops: large inputs: elementwise ops, full reductions, conversions, matmul and cat") {
  check_large(kLargeGroups[0]);
}
EMBER_GRADCHECK_FAMILY("loss")
EMBER_GRADCHECK_FAMILY("pool")

// Round 5.
EMBER_GRADCHECK_FAMILY("inplace")
EMBER_GRADCHECK_FAMILY("copy")
EMBER_GRADCHECK_FAMILY("unary")
EMBER_GRADCHECK_FAMILY("where")
EMBER_GRADCHECK_FAMILY("reduce")
EMBER_GRADCHECK_FAMILY("linear")

// Round 6.
EMBER_GRADCHECK_FAMILY("embedding")
EMBER_GRADCHECK_FAMILY("softmax")
EMBER_GRADCHECK_FAMILY("stack")
EMBER_GRADCHECK_FAMILY("dropout")
EMBER_GRADCHECK_FAMILY("matmul")
EMBER_GRADCHECK_FAMILY("binary")

// Round 7.
EMBER_GRADCHECK_FAMILY("activation")
EMBER_GRADCHECK_FAMILY("cat")
EMBER_GRADCHECK_FAMILY("index")
