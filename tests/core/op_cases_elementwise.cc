// Elementwise op cases: unary ops, binary arithmetic, scalar operands, comparisons and where.
// References use <cmath> on doubles; results are rounded to the output dtype by the harness.
#include <cmath>

#include "tests/core/op_cases.h"

namespace ember::test {

namespace {

using Values = std::vector<double>;
using Tensors = std::vector<Tensor>;
using Refs = std::vector<RefTensor>;

DType same(DType d) { return d; }
DType to_bool(DType) { return kBool; }
// `x op int scalar` keeps the tensor's dtype, except bool, which becomes int64.
DType int_scalar_result(DType d) { return d == kBool ? kInt64 : d; }

const std::vector<DType> kFloatingAndInt = kNumericDTypes;
const ValueRange kSymmetric{-3.0, 3.0};
const ValueRange kPositive{0.1, 5.0};
const ValueRange kNonNegative{0.0, 5.0};
const ValueRange kWhole{-3.0, 3.0, true};

OpCase unary_case(const std::string& name, std::vector<DType> dtypes, ValueRange range,
                  std::function<Tensor(const Tensor&)> op, std::function<double(double)> ref,
                  DType (*result)(DType) = same) {
  OpCase c;
  c.name = name;
  c.dtypes = std::move(dtypes);
  c.inputs = {InputSpec{range}};
  c.shapes = same_shape(1);
  c.run = [op](const Tensors& x, const OpArgs&) { return Tensors{op(x[0])}; };
  c.reference = [ref, result](const Refs& x, const OpArgs&) {
    return Refs{ref_elementwise(x, result(x[0].dtype), [&](const Values& v) { return ref(v[0]); })};
  };
  return c;
}

OpCase binary_case(const std::string& name, std::vector<DType> dtypes, ValueRange a, ValueRange b,
                   std::function<Tensor(const Tensor&, const Tensor&)> op, std::function<double(double, double)> ref,
                   DType (*result)(DType) = same) {
  OpCase c;
  c.name = name;
  c.dtypes = std::move(dtypes);
  c.inputs = {InputSpec{a}, InputSpec{b}};
  c.shapes = elementwise_shapes(2);
  c.run = [op](const Tensors& x, const OpArgs&) { return Tensors{op(x[0], x[1])}; };
  c.reference = [ref, result](const Refs& x, const OpArgs&) {
    return Refs{ref_elementwise(x, result(x[0].dtype), [&](const Values& v) { return ref(v[0], v[1]); })};
  };
  return c;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double sign(double x) { return static_cast<double>((x > 0) - (x < 0)); }

}  // namespace

std::vector<OpCase> unary_cases() {
  const std::vector<DType> floats = kFloatingDTypes, numeric = kNumericDTypes, all = kAllDTypes;
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  return {
      unary_case(
          "neg", numeric, kSymmetric, [](const Tensor& x) { return -x; }, [](double x) { return -x; }),
      unary_case(
          "exp", numeric, kSymmetric, [](const Tensor& x) { return x.exp(); }, [](double x) { return std::exp(x); },
          floating_result),
      unary_case(
          "log", numeric, kPositive, [](const Tensor& x) { return x.log(); }, [](double x) { return std::log(x); },
          floating_result),
      unary_case(
          "log1p", numeric, {-0.9, 3.0}, [](const Tensor& x) { return x.log1p(); },
          [](double x) { return std::log1p(x); }, floating_result),
      unary_case(
          "expm1", numeric, {-2.0, 2.0}, [](const Tensor& x) { return x.expm1(); },
          [](double x) { return std::expm1(x); }, floating_result),
      unary_case(
          "sqrt", numeric, kNonNegative, [](const Tensor& x) { return x.sqrt(); },
          [](double x) { return std::sqrt(x); }, floating_result),
      unary_case(
          "rsqrt", numeric, kPositive, [](const Tensor& x) { return x.rsqrt(); },
          [](double x) { return 1.0 / std::sqrt(x); }, floating_result),
      unary_case(
          "abs", all, kSymmetric, [](const Tensor& x) { return x.abs(); }, [](double x) { return std::fabs(x); }),
      unary_case(
          "sign", numeric, kSymmetric, [](const Tensor& x) { return x.sign(); }, sign),
      unary_case(
          "relu", all, kSymmetric, [](const Tensor& x) { return x.relu(); }, [](double x) { return x > 0 ? x : 0.0; }),
      unary_case(
          "gelu", numeric, kSymmetric, [](const Tensor& x) { return x.gelu(); },
          [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, floating_result),
      calling({"gelu", "gelu_tanh"},
              unary_case(
                  "gelu_tanh", numeric, kSymmetric, [](const Tensor& x) { return x.gelu(true); },
                  [=](double x) { return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x))); },
                  floating_result)),
      unary_case(
          "silu", numeric, kSymmetric, [](const Tensor& x) { return x.silu(); },
          [](double x) { return x * sigmoid(x); }, floating_result),
      unary_case(
          "sigmoid", numeric, kSymmetric, [](const Tensor& x) { return x.sigmoid(); }, sigmoid, floating_result),
      unary_case(
          "tanh", numeric, kSymmetric, [](const Tensor& x) { return x.tanh(); }, [](double x) { return std::tanh(x); },
          floating_result),
      unary_case(
          "clamp", floats, kSymmetric, [](const Tensor& x) { return x.clamp(-0.5, 1.25); },
          [](double x) { return std::min(std::max(x, -0.5), 1.25); }),
      calling({"clamp"}, unary_case(
                             "clamp_int", numeric, kWhole, [](const Tensor& x) { return x.clamp(-1, 2); },
                             [](double x) { return std::min(std::max(x, -1.0), 2.0); })),
      calling({"clamp"}, unary_case(
                             "clamp_min", numeric, kSymmetric, [](const Tensor& x) { return x.clamp_min(1); },
                             [](double x) { return std::max(x, 1.0); })),
      calling({"clamp"}, unary_case(
                             "clamp_max", floats, kSymmetric, [](const Tensor& x) { return x.clamp_max(-0.75); },
                             [](double x) { return std::min(x, -0.75); })),
      calling({"pow"}, unary_case(
                           "pow_scalar_2", numeric, kSymmetric, [](const Tensor& x) { return x.pow(2); },
                           [](double x) { return x * x; })),
      calling({"pow"}, unary_case(
                           "pow_scalar_3", numeric, kSymmetric, [](const Tensor& x) { return x.pow(3); },
                           [](double x) { return x * x * x; })),
      calling({"pow"}, unary_case(
                           "pow_scalar_0.5", numeric, kNonNegative, [](const Tensor& x) { return x.pow(0.5); },
                           [](double x) { return std::sqrt(x); }, floating_result)),
      calling({"pow"}, unary_case(
                           "pow_scalar_-1.5", floats, kPositive, [](const Tensor& x) { return x.pow(-1.5); },
                           [](double x) { return std::pow(x, -1.5); })),
      unary_case(
          "leaky_relu", floats, kSymmetric, [](const Tensor& x) { return x.leaky_relu(0.2); },
          [](double x) { return x > 0 ? x : 0.2 * x; }),
      unary_case(
          "reciprocal", numeric, {-3.0, 3.0, false, true}, [](const Tensor& x) { return x.reciprocal(); },
          [](double x) { return 1.0 / x; }, floating_result),
      unary_case(
          "square", numeric, kSymmetric, [](const Tensor& x) { return x.square(); }, [](double x) { return x * x; }),
      unary_case(
          "sin", numeric, {-4.0, 4.0}, [](const Tensor& x) { return x.sin(); }, [](double x) { return std::sin(x); },
          floating_result),
      unary_case(
          "cos", numeric, {-4.0, 4.0}, [](const Tensor& x) { return x.cos(); }, [](double x) { return std::cos(x); },
          floating_result),
      unary_case(
          "erf", numeric, kSymmetric, [](const Tensor& x) { return x.erf(); }, [](double x) { return std::erf(x); },
          floating_result),
      unary_case(
          "floor", numeric, {-4.0, 4.0}, [](const Tensor& x) { return x.floor(); },
          [](double x) { return std::floor(x); }),
      unary_case(
          "ceil", numeric, {-4.0, 4.0}, [](const Tensor& x) { return x.ceil(); },
          [](double x) { return std::ceil(x); }),
      // nearbyint in the default rounding mode is round-half-to-even, as torch.round.
      unary_case(
          "round", numeric, {-4.0, 4.0}, [](const Tensor& x) { return x.round(); },
          [](double x) { return std::nearbyint(x); }),
  };
}

std::vector<OpCase> binary_cases() {
  const std::vector<DType> floats = kFloatingDTypes, numeric = kNumericDTypes, all = kAllDTypes;
  const std::vector<DType> signed_ints = {kInt64, kInt32};
  const ValueRange divisor{-3.0, 3.0, false, true};
  std::vector<OpCase> cases = {
      binary_case(
          "add", all, kSymmetric, kSymmetric, [](const Tensor& a, const Tensor& b) { return a + b; },
          [](double a, double b) { return a + b; }),
      calling({"add"}, binary_case(
                           "add_alpha", floats, kSymmetric, kSymmetric,
                           [](const Tensor& a, const Tensor& b) { return a.add(b, -1.5); },
                           [](double a, double b) { return a - 1.5 * b; })),
      calling({"add"}, binary_case(
                           "add_alpha_int", kIntegerDTypes, kWhole, kWhole,
                           [](const Tensor& a, const Tensor& b) { return a.add(b, 3); },
                           [](double a, double b) { return a + 3 * b; })),
      binary_case(
          "sub", numeric, kSymmetric, kSymmetric, [](const Tensor& a, const Tensor& b) { return a - b; },
          [](double a, double b) { return a - b; }),
      calling({"sub"}, binary_case(
                           "sub_alpha", floats, kSymmetric, kSymmetric,
                           [](const Tensor& a, const Tensor& b) { return a.sub(b, 0.5); },
                           [](double a, double b) { return a - 0.5 * b; })),
      calling({"sub"}, binary_case(
                           "sub_alpha_int", signed_ints, kWhole, kWhole,
                           [](const Tensor& a, const Tensor& b) { return a.sub(b, 2); },
                           [](double a, double b) { return a - 2 * b; })),
      binary_case(
          "mul", all, kSymmetric, kSymmetric, [](const Tensor& a, const Tensor& b) { return a * b; },
          [](double a, double b) { return a * b; }),
      binary_case(
          "div", numeric, kSymmetric, divisor, [](const Tensor& a, const Tensor& b) { return a / b; },
          [](double a, double b) { return a / b; }, floating_result),
      binary_case(
          "pow", floats, {0.25, 3.0}, {-2.0, 2.0}, [](const Tensor& a, const Tensor& b) { return a.pow(b); },
          [](double a, double b) { return std::pow(a, b); }),
      calling({"pow"}, binary_case(
                           "pow_int", kIntegerDTypes, {0.0, 4.0}, {0.0, 3.0},
                           [](const Tensor& a, const Tensor& b) { return a.pow(b); },
                           [](double a, double b) { return std::pow(a, b); })),
      binary_case(
          "minimum", all, kSymmetric, kSymmetric, [](const Tensor& a, const Tensor& b) { return a.minimum(b); },
          [](double a, double b) { return std::min(a, b); }),
      binary_case(
          "maximum", all, kSymmetric, kSymmetric, [](const Tensor& a, const Tensor& b) { return a.maximum(b); },
          [](double a, double b) { return std::max(a, b); }),
      binary_case(
          "add_relu", numeric, kSymmetric, kSymmetric, [](const Tensor& a, const Tensor& b) { return add_relu(a, b); },
          [](double a, double b) { return std::max(a + b, 0.0); }),
      // Scalar operands: a float scalar lifts integer tensors to float32, an int scalar keeps the dtype.
      calling({"add"}, unary_case(
                           "add_scalar_float", all, kSymmetric, [](const Tensor& x) { return x + 2.5; },
                           [](double x) { return x + 2.5; }, floating_result)),
      calling({"mul"}, unary_case(
                           "mul_scalar_int", all, kSymmetric, [](const Tensor& x) { return x * 3; },
                           [](double x) { return x * 3; }, int_scalar_result)),
      calling({"sub"}, unary_case(
                           "rsub_scalar", floats, kSymmetric, [](const Tensor& x) { return 1.5 - x; },
                           [](double x) { return 1.5 - x; })),
      calling({"div"}, unary_case(
                           "rdiv_scalar", numeric, divisor, [](const Tensor& x) { return 2 / x; },
                           [](double x) { return 2 / x; }, floating_result)),
      calling({"div"}, unary_case(
                           "div_scalar", numeric, kSymmetric, [](const Tensor& x) { return x / 4; },
                           [](double x) { return x / 4; }, floating_result)),
  };
  struct Comparison {
    const char* name;
    Tensor (Tensor::*op)(const Tensor&) const;
    bool (*ref)(double, double);
  };
  const Comparison comparisons[] = {
      {"eq", &Tensor::eq, [](double a, double b) { return a == b; }},
      {"ne", &Tensor::ne, [](double a, double b) { return a != b; }},
      {"lt", &Tensor::lt, [](double a, double b) { return a < b; }},
      {"le", &Tensor::le, [](double a, double b) { return a <= b; }},
      {"gt", &Tensor::gt, [](double a, double b) { return a > b; }},
      {"ge", &Tensor::ge, [](double a, double b) { return a >= b; }},
  };
  for (const Comparison& cmp : comparisons) {
    // Whole numbers in a small range, so that equal pairs are common.
    cases.push_back(binary_case(
        cmp.name, all, kWhole, kWhole, [op = cmp.op](const Tensor& a, const Tensor& b) { return (a.*op)(b); },
        [ref = cmp.ref](double a, double b) { return ref(a, b) ? 1.0 : 0.0; }, to_bool));
  }
  OpCase where_case;
  where_case.name = "where";
  where_case.dtypes = all;
  where_case.inputs = {InputSpec{{0.0, 1.0}, kBool}, InputSpec{kSymmetric}, InputSpec{kSymmetric}};
  where_case.shapes = elementwise_shapes(3);
  where_case.run = [](const Tensors& x, const OpArgs&) { return Tensors{where(x[0], x[1], x[2])}; };
  where_case.reference = [](const Refs& x, const OpArgs&) {
    return Refs{ref_elementwise(x, x[1].dtype, [](const Values& v) { return v[0] != 0.0 ? v[1] : v[2]; })};
  };
  cases.push_back(where_case);
  return cases;
}

}  // namespace ember::test
