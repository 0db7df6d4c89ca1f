// The op harness's own tests: the table's names and coverage, and that the harness can fail (a
// wrong value, a wrong dtype, a stray write or a missing error must each be reported). The table
// itself runs on every backend in backend_ops_test.cc.
#include <set>

#include <catch2/catch.hpp>

#include "tests/core/op_cases.h"

using namespace ember;
using namespace ember::test;

namespace {

OpCase negation_case() {
  OpCase c;
  c.name = "neg_for_self_test";
  c.dtypes = {kFloat32};
  c.inputs = {InputSpec{}};
  c.shapes = same_shape(1);
  c.run = [](const std::vector<Tensor>& x, const OpArgs&) { return std::vector<Tensor>{x[0].neg()}; };
  c.reference = [](const std::vector<RefTensor>& x, const OpArgs&) {
    return std::vector<RefTensor>{ref_elementwise(x, kFloat32, [](const std::vector<double>& v) { return -v[0]; })};
  };
  return c;
}

}  // namespace

TEST_CASE("the table's case names are unique") {
  std::set<std::string> names;
  for (const OpCase& c : all_op_cases()) CHECK(names.insert(c.name).second);
}

TEST_CASE("the table has a case for every unary primitive") {
  std::set<std::string> names;
  for (const OpCase& c : all_op_cases()) names.insert(c.name);
  for (int op = 0; op < kNumUnaryOps; ++op) {
    std::string name = unary_op_name(static_cast<UnaryOp>(op));
    if (name == "pow") name = "pow_scalar_2";  // PowScalar is spelled after its exponent
    INFO("unary op " << name);
    CHECK(names.count(name) == 1);
  }
}

TEST_CASE("the harness reports wrong values, wrong dtypes and stray writes") {
  OpCase good = negation_case();
  REQUIRE(check_op_case(good, Device(kCPU)).empty());

  OpCase wrong_value = good;
  wrong_value.run = [](const std::vector<Tensor>& x, const OpArgs&) { return std::vector<Tensor>{x[0] * 1.001}; };
  CHECK_FALSE(check_op_case(wrong_value, Device(kCPU)).empty());

  OpCase wrong_dtype = good;
  wrong_dtype.run = [](const std::vector<Tensor>& x, const OpArgs&) {
    return std::vector<Tensor>{x[0].neg().to(kFloat64)};
  };
  CHECK_FALSE(check_op_case(wrong_dtype, Device(kCPU)).empty());

  OpCase modifies_input = good;
  modifies_input.run = [](const std::vector<Tensor>& x, const OpArgs&) {
    Tensor out = x[0].neg();
    Tensor input = x[0];
    input.zero_();
    return std::vector<Tensor>{out};
  };
  CHECK_FALSE(check_op_case(modifies_input, Device(kCPU)).empty());

  OpCase throws = good;
  throws.run = [](const std::vector<Tensor>&, const OpArgs&) -> std::vector<Tensor> { throw Error("boom"); };
  auto failures = check_op_case(throws, Device(kCPU));
  REQUIRE_FALSE(failures.empty());
  CHECK_THAT(failures[0], Catch::Contains("boom"));

  // An error case fails when its op returns or raises another message, and passes on its own.
  OpCase must_raise = good;
  must_raise.expect_error = "boom";
  CHECK_FALSE(check_op_case(must_raise, Device(kCPU)).empty());
  must_raise.run = throws.run;
  CHECK(check_op_case(must_raise, Device(kCPU)).empty());
  must_raise.expect_error = "bang";
  failures = check_op_case(must_raise, Device(kCPU));
  REQUIRE_FALSE(failures.empty());
  CHECK_THAT(failures[0], Catch::Contains("raised \"boom\""));
}

TEST_CASE("the reference helpers broadcast and reduce by hand") {
  RefTensor a{{2, 1}, kFloat64, {1, 2}}, b{{3}, kFloat64, {10, 20, 30}};
  RefTensor sum = ref_elementwise({a, b}, kFloat64, [](const std::vector<double>& v) { return v[0] + v[1]; });
  CHECK(sum.shape == Shape{2, 3});
  CHECK(sum.values == std::vector<double>{11, 21, 31, 12, 22, 32});
  RefTensor x{{2, 3}, kFloat64, {1, 2, 3, 4, 5, 6}};
  auto total = [](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += e;
    return s;
  };
  CHECK(ref_reduce(x, {-1}, false, kFloat64, total).values == std::vector<double>{6, 15});
  CHECK(ref_reduce(x, {0}, true, kFloat64, total).shape == Shape{1, 3});
  CHECK(ref_reduce(x, {}, false, kFloat64, total).values == std::vector<double>{21});
  CHECK(round_to_dtype(1.0 + 1.0 / 512, kBFloat16) == 1.0);  // halfway: ties to even
  CHECK(round_to_dtype(1.0 + 3.0 / 512, kBFloat16) == 1.0 + 4.0 / 512);
  CHECK(round_to_dtype(65520.0, kFloat16) == INFINITY);
  CHECK(round_to_dtype(-2.7, kInt32) == -2.0);
  CHECK(round_to_dtype(-3.0, kUInt8) == 253.0);
}
