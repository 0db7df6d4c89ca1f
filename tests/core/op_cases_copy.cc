// Copy and in-place cases: to(dtype) between every pair of dtypes, clone/contiguous, and the
// in-place ops (add_, sub_, mul_, div_, clamp_, fill_, copy_) writing into non-contiguous views
// with broadcasting and casting. The harness checks that nothing outside the view changes.
#include <cmath>
#include <limits>

#include "tests/core/op_cases.h"

namespace ember::test {

namespace {

using Values = std::vector<double>;
using Tensors = std::vector<Tensor>;
using Refs = std::vector<RefTensor>;

// An in-place op on input 0 (the destination) with the others broadcast to it. The result keeps
// the destination's dtype whatever the computation's.
OpCase inplace_case(const std::string& name, std::vector<DType> dtypes, std::vector<InputSpec> inputs,
                    std::function<void(Tensor&, const Tensors&)> op, std::function<double(const Values&)> ref) {
  OpCase c;
  c.name = name;
  c.dtypes = std::move(dtypes);
  c.inputs = std::move(inputs);
  c.shapes = inplace_shapes(static_cast<int>(c.inputs.size()));
  c.inplace_dest = 0;
  c.run = [op](const Tensors& x, const OpArgs&) {
    Tensor dst = x[0];
    op(dst, x);
    return Tensors{dst};
  };
  c.reference = [ref](const Refs& x, const OpArgs&) { return Refs{ref_elementwise(x, x[0].dtype, ref)}; };
  return c;
}

}  // namespace

std::vector<OpCase> copy_cases() {
  const std::vector<DType> floats = kFloatingDTypes, numeric = kNumericDTypes, all = kAllDTypes;
  const ValueRange symmetric{-3.0, 3.0}, whole{-3.0, 3.0, true};
  std::vector<OpCase> cases;

  // Between floating dtypes: infinities and NaN pass, values beyond a dtype's range become
  // infinities (float16 from 65520 up: the tie at 2^16 rounds to inf), ties round to even, float16
  // underflows gradually (2^-25 ties to zero), and float32's subnormals reach bfloat16.
  const double infinity = std::numeric_limits<double>::infinity();
  const std::vector<double> float_edges = {infinity,
                                           -infinity,
                                           std::numeric_limits<double>::quiet_NaN(),
                                           -0.0,
                                           65504.0,
                                           65519.0,
                                           -65520.0,
                                           1e6,
                                           3.0e38,
                                           -3.4028234663852886e38,
                                           1e39,
                                           1.0 + std::ldexp(1.0, -8),
                                           -(1.0 + 3 * std::ldexp(1.0, -8)),
                                           1.0 + std::ldexp(1.0, -11),
                                           1.0 + 3 * std::ldexp(1.0, -11),
                                           std::ldexp(1.0, -14),
                                           std::ldexp(1.0, -24),
                                           -std::ldexp(1.0, -25),
                                           std::ldexp(1.5, -25),
                                           1e-8,
                                           1e-40};
  for (DType target : kAllDTypes) {
    OpCase c;
    c.name = std::string("to_") + dtype_name(target);
    c.ops = {"to"};
    c.dtypes = all;
    c.exact = true;
    // Fractions and negatives exercise truncation toward zero; uint8 only receives what it can hold.
    ValueRange range = target == kUInt8 ? ValueRange{0.0, 100.0} : ValueRange{-100.0, 100.0};
    if (is_floating(target)) range.specials = float_edges;
    c.inputs = {InputSpec{range}};
    c.shapes = same_shape(1);
    c.run = [target](const Tensors& x, const OpArgs&) { return Tensors{x[0].to(target)}; };
    // float64 reaches 16 bits through float32, as PyTorch's conversions do.
    c.reference = [target](const Refs& x, const OpArgs&) {
      const bool through_float32 = x[0].dtype == kFloat64 && (target == kBFloat16 || target == kFloat16);
      return Refs{ref_elementwise(x, target, [through_float32](const Values& v) {
        return through_float32 ? round_to_dtype(v[0], kFloat32) : v[0];
      })};
    };
    cases.push_back(c);
  }
  for (bool contiguous : {false, true}) {
    OpCase c;
    c.name = contiguous ? "contiguous" : "clone";
    c.dtypes = all;
    c.exact = true;
    c.inputs = {InputSpec{symmetric}};
    c.shapes = same_shape(1);
    c.run = [contiguous](const Tensors& x, const OpArgs&) {
      Tensor out = contiguous ? x[0].contiguous() : x[0].clone();
      // clone keeps a dense input's layout (PyTorch's preserve_format); anything else comes out
      // contiguous, as contiguous() always does.
      bool keeps_layout = !contiguous && is_dense(x[0]) && !x[0].is_contiguous();
      if (keeps_layout)
        EMBER_CHECK(out.strides() == x[0].strides() || x[0].numel() <= 1, "clone should keep the dense layout ",
                    shape_str(x[0].strides()), ", got ", shape_str(out.strides()));
      else
        EMBER_CHECK(out.is_contiguous(), "the result should be contiguous, strides ", shape_str(out.strides()));
      EMBER_CHECK(out.storage() != x[0].storage() || (contiguous && x[0].is_contiguous()),
                  "the result should not share the input's storage");
      return Tensors{out};
    };
    c.reference = [](const Refs& x, const OpArgs&) { return Refs{x[0]}; };
    cases.push_back(c);
  }

  // copy_'s source may be on any device: the copy crosses to the destination's.
  const auto copy_case = [](const std::string& name, std::vector<InputSpec> inputs) {
    inputs[1].any_device = true;
    OpCase c =
        calling({"copy_"}, inplace_case(
                               name, kAllDTypes, std::move(inputs), [](Tensor& d, const Tensors& x) { d.copy_(x[1]); },
                               [](const Values& v) { return v[1]; }));
    c.exact = true;
    return c;
  };
  cases.push_back(copy_case("copy_", {InputSpec{symmetric}, InputSpec{symmetric}}));
  // Casting copies: the source's dtype is fixed, the destination takes every dtype.
  cases.push_back(copy_case("copy_from_float32", {InputSpec{symmetric}, InputSpec{{0.0, 50.0}, kFloat32}}));
  cases.push_back(copy_case("copy_from_int32", {InputSpec{symmetric}, InputSpec{{0.0, 50.0}, kInt32}}));
  cases.push_back(copy_case("copy_from_bfloat16", {InputSpec{symmetric}, InputSpec{{0.0, 50.0}, kBFloat16}}));

  auto sum = [](const Values& v) { return v[0] + v[1]; };
  cases.push_back(inplace_case(
      "add_", all, {InputSpec{symmetric}, InputSpec{symmetric}}, [](Tensor& d, const Tensors& x) { d.add_(x[1]); },
      sum));
  cases.push_back(calling({"add_"}, inplace_case(
                                        "add_alpha_", floats, {InputSpec{symmetric}, InputSpec{symmetric}},
                                        [](Tensor& d, const Tensors& x) { d.add_(x[1], 0.5); },
                                        [](const Values& v) { return v[0] + 0.5 * v[1]; })));
  cases.push_back(
      calling({"add_"}, inplace_case(
                            "add_scalar_", numeric, {InputSpec{symmetric}},
                            [](Tensor& d, const Tensors&) { d.add_(2); }, [](const Values& v) { return v[0] + 2; })));
  // A wider operand: computed in float64 (or int64), cast back into the destination. A 0-dim one
  // does not promote: it rounds to the destination's dtype first, as in PyTorch.
  OpCase add_float64 =
      calling({"add_"}, inplace_case(
                            "add_float64_", floats, {InputSpec{symmetric}, InputSpec{symmetric, kFloat64}},
                            [](Tensor& d, const Tensors& x) { d.add_(x[1]); }, sum));
  add_float64.tolerance_scale = 2;
  add_float64.reference = [sum](const Refs& x, const OpArgs&) {
    RefTensor out = ref_elementwise(x, x[0].dtype, sum);
    out.magnitude =
        ref_elementwise(x, kFloat64, [](const Values& v) { return std::fabs(v[0]) + std::fabs(v[1]); }).values;
    return Refs{out};
  };
  cases.push_back(add_float64);
  cases.push_back(calling({"add_"}, inplace_case(
                                        "add_int64_", kIntegerDTypes, {InputSpec{whole}, InputSpec{{0.0, 3.0}, kInt64}},
                                        [](Tensor& d, const Tensors& x) { d.add_(x[1]); }, sum)));
  cases.push_back(inplace_case(
      "sub_", numeric, {InputSpec{symmetric}, InputSpec{symmetric}}, [](Tensor& d, const Tensors& x) { d.sub_(x[1]); },
      [](const Values& v) { return v[0] - v[1]; }));
  cases.push_back(inplace_case(
      "mul_", all, {InputSpec{symmetric}, InputSpec{symmetric}}, [](Tensor& d, const Tensors& x) { d.mul_(x[1]); },
      [](const Values& v) { return v[0] * v[1]; }));
  cases.push_back(calling(
      {"mul_"}, inplace_case(
                    "mul_scalar_", floats, {InputSpec{symmetric}}, [](Tensor& d, const Tensors&) { d.mul_(-1.5); },
                    [](const Values& v) { return v[0] * -1.5; })));
  cases.push_back(inplace_case(
      "div_", floats, {InputSpec{symmetric}, InputSpec{{-3.0, 3.0, false, true}}},
      [](Tensor& d, const Tensors& x) { d.div_(x[1]); }, [](const Values& v) { return v[0] / v[1]; }));
  cases.push_back(inplace_case(
      "clamp_", floats, {InputSpec{symmetric}}, [](Tensor& d, const Tensors&) { d.clamp_(-1.5, 0.5); },
      [](const Values& v) { return std::min(std::max(v[0], -1.5), 0.5); }));
  cases.push_back(calling(
      {"clamp_"}, inplace_case(
                      "clamp_int_", numeric, {InputSpec{whole}}, [](Tensor& d, const Tensors&) { d.clamp_(-1, 2); },
                      [](const Values& v) { return std::min(std::max(v[0], -1.0), 2.0); })));
  cases.push_back(inplace_case(
      "relu_", numeric, {InputSpec{symmetric}}, [](Tensor& d, const Tensors&) { d.relu_(); },
      [](const Values& v) { return std::max(v[0], 0.0); }));
  cases.push_back(inplace_case(
      "fill_", all, {InputSpec{symmetric}}, [](Tensor& d, const Tensors&) { d.fill_(2.5); },
      [](const Values&) { return 2.5; }));
  cases.push_back(inplace_case(
      "zero_", all, {InputSpec{symmetric}}, [](Tensor& d, const Tensors&) { d.zero_(); },
      [](const Values&) { return 0.0; }));
  return cases;
}

}  // namespace ember::test
