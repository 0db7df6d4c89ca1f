// Gradient-check cases for the elementwise families: every unary op (random shapes, each also
// on a non-contiguous input), every binary op across broadcasting patterns, scalar operands
// (0-dim CPU ones with a GPU operand too), mixed precision, and where.
#include <string>

#include "tests/autograd/cases.h"

namespace ember::testing {

namespace {

struct UnaryCase {
  std::string name;
  std::function<Tensor(const Tensor&)> fn;
  double low, high;
  std::vector<double> avoid = {};
};

std::vector<double> integers(int lo, int hi) {
  std::vector<double> out;
  for (int i = lo; i <= hi; ++i) out.push_back(i);
  return out;
}

std::vector<double> halves(int lo, int hi) {  // round() jumps at every n + 0.5
  std::vector<double> out = integers(lo, hi);
  for (int i = lo; i < hi; ++i) out.push_back(i + 0.5);
  return out;
}

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Tensor& x) { return x.neg(); }, -1, 1},
      {"neg.operator", [](const Tensor& x) { return -x; }, -1, 1},
      {"exp", [](const Tensor& x) { return x.exp(); }, -2, 2},
      {"log", [](const Tensor& x) { return x.log(); }, 0.2, 3},
      {"log1p", [](const Tensor& x) { return x.log1p(); }, -0.7, 2},
      {"expm1", [](const Tensor& x) { return x.expm1(); }, -2, 2},
      {"sqrt", [](const Tensor& x) { return x.sqrt(); }, 0.2, 3},
      {"rsqrt", [](const Tensor& x) { return x.rsqrt(); }, 0.2, 3},
      {"abs", [](const Tensor& x) { return x.abs(); }, -2, 2, {0}},
      {"sign", [](const Tensor& x) { return x.sign(); }, -2, 2, {0}},
      {"relu", [](const Tensor& x) { return x.relu(); }, -2, 2, {0}},
      {"gelu", [](const Tensor& x) { return x.gelu(); }, -3, 3},
      {"gelu_tanh", [](const Tensor& x) { return x.gelu(true); }, -3, 3},
      {"silu", [](const Tensor& x) { return x.silu(); }, -3, 3},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }, -3, 3},
      {"tanh", [](const Tensor& x) { return x.tanh(); }, -2, 2},
      {"clamp", [](const Tensor& x) { return x.clamp(-0.5, 0.7); }, -1, 1, {-0.5, 0.7}},
      {"clamp.min", [](const Tensor& x) { return x.clamp_min(-0.25); }, -1, 1, {-0.25}},
      {"clamp.max", [](const Tensor& x) { return x.clamp_max(0.25); }, -1, 1, {0.25}},
      {"pow.cube", [](const Tensor& x) { return x.pow(3.0); }, -2, 2},
      {"pow.fractional", [](const Tensor& x) { return x.pow(2.5); }, 0.2, 2},
      {"pow.negative", [](const Tensor& x) { return x.pow(-1.5); }, 0.3, 2},
      {"pow.half", [](const Tensor& x) { return x.pow(0.5); }, 0.2, 2},  // forward takes sqrt
      {"pow.two", [](const Tensor& x) { return x.pow(2); }, -2, 2},      // forward takes x * x
      {"pow.zero", [](const Tensor& x) { return x.pow(0.0) + x; }, -2, 2},
      {"leaky_relu", [](const Tensor& x) { return x.leaky_relu(0.1); }, -2, 2, {0}},
      {"reciprocal", [](const Tensor& x) { return x.reciprocal(); }, 0.3, 2},
      {"reciprocal.negative", [](const Tensor& x) { return x.reciprocal(); }, -2, -0.3},
      {"square", [](const Tensor& x) { return x.square(); }, -2, 2},
      {"sin", [](const Tensor& x) { return x.sin(); }, -3, 3},
      {"cos", [](const Tensor& x) { return x.cos(); }, -3, 3},
      {"erf", [](const Tensor& x) { return x.erf(); }, -2, 2},
      {"floor", [](const Tensor& x) { return x.floor() * x; }, -2.9, 2.9, integers(-3, 3)},
      {"ceil", [](const Tensor& x) { return x.ceil() * x; }, -2.9, 2.9, integers(-3, 3)},
      {"round", [](const Tensor& x) { return x.round() * x; }, -2.9, 2.9, halves(-3, 3)},
  };
}

Tensor positive(const Tensor& t) { return t > scalar_tensor(0.0, t.dtype(), t.device()); }

void add_unary(std::vector<GradCase>& cases) {
  ShapeDraw draw(20240611);
  const Layout strided[] = {Layout::Transposed, Layout::Strided, Layout::Expanded};
  int k = 0;
  for (const UnaryCase& u : unary_cases()) {
    auto fn = [f = u.fn](const Inputs& x) { return f(x[0]); };
    InputSpec contiguous{.shape = draw.next(0, 4), .low = u.low, .high = u.high, .avoid = u.avoid};
    cases.push_back({.name = "unary." + u.name, .fn = fn, .inputs = {contiguous}});
    InputSpec other = contiguous;
    other.shape = draw.next(2, 4);
    other.layout = strided[k++ % 3];
    cases.push_back({.name = "unary." + u.name + ".noncontiguous", .fn = fn, .inputs = {other}});
  }
}

struct BinaryOpCase {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  double a_low, a_high, b_low, b_high;
};

// Shape and layout pairs that exercise broadcasting of every kind and strided operands.
struct OperandPair {
  std::string name;
  InputSpec a, b;
};

std::vector<OperandPair> operand_pairs() {
  return {
      {"same", {.shape = {3, 4}}, {.shape = {3, 4}}},
      {"broadcast_rank", {.shape = {2, 3, 5}}, {.shape = {5}}},
      {"broadcast_both", {.shape = {3, 1, 5}}, {.shape = {2, 1}}},
      {"zero_dim", {.shape = {}}, {.shape = {2, 3}}},
      {"size_one", {.shape = {1}}, {.shape = {3, 1, 2}}},
      {"noncontiguous", {.shape = {4, 3}, .layout = Layout::Transposed}, {.shape = {4, 3}, .layout = Layout::Strided}},
      {"expanded", {.shape = {3, 5}, .layout = Layout::Expanded}, {.shape = {2, 1, 5}, .layout = Layout::Transposed}},
      // A 0-dim CPU operand with one on the case's device (the result lands there): each
      // gradient must come back on its own input's device, the scalar's summed over the broadcast.
      {"host_scalar", {.shape = {3, 4}}, {.shape = {}, .on_host = true}},
      {"host_scalar_first", {.shape = {}, .on_host = true}, {.shape = {2, 3}, .layout = Layout::Transposed}},
  };
}

void add_binary(std::vector<GradCase>& cases) {
  const std::vector<BinaryOpCase> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, -1, 1, -1, 1},
      {"add.alpha", [](const Tensor& a, const Tensor& b) { return a.add(b, 2.5); }, -1, 1, -1, 1},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, -1, 1, -1, 1},
      {"sub.alpha", [](const Tensor& a, const Tensor& b) { return a.sub(b, -0.75); }, -1, 1, -1, 1},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, -1, 1, -1, 1},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, -1, 1, 0.5, 1.5},
      {"div.negative", [](const Tensor& a, const Tensor& b) { return a / b; }, -1, 1, -1.5, -0.5},
      {"pow", [](const Tensor& a, const Tensor& b) { return a.pow(b); }, 0.5, 2, -2, 2},
      {"minimum", [](const Tensor& a, const Tensor& b) { return a.minimum(b); }, -1, 1, -1, 1},
      {"maximum", [](const Tensor& a, const Tensor& b) { return a.maximum(b); }, -1, 1, -1, 1},
      {"add_relu", [](const Tensor& a, const Tensor& b) { return add_relu(a, b); }, -1, 1, -1, 1},
  };
  for (const BinaryOpCase& op : ops) {
    for (OperandPair pair : operand_pairs()) {
      pair.a.low = op.a_low, pair.a.high = op.a_high;
      pair.b.low = op.b_low, pair.b.high = op.b_high;
      auto fn = [f = op.fn](const Inputs& x) { return f(x[0], x[1]); };
      cases.push_back({.name = "binary." + op.name + "." + pair.name, .fn = fn, .inputs = {pair.a, pair.b}});
    }
  }
  auto unary_input = [](double low, double high) {
    return std::vector<InputSpec>{{.shape = {2, 3}, .low = low, .high = high}};
  };
  cases.push_back({.name = "binary.add.scalar",
                   .fn = [](const Inputs& x) { return 2.0 + x[0] + 1; },
                   .inputs = unary_input(-1, 1)});
  cases.push_back({.name = "binary.sub.scalar",
                   .fn = [](const Inputs& x) { return (2.0 - x[0]) - 0.5; },
                   .inputs = unary_input(-1, 1)});
  cases.push_back({.name = "binary.mul.scalar",
                   .fn = [](const Inputs& x) { return -3.0 * x[0] * 0.5; },
                   .inputs = unary_input(-1, 1)});
  cases.push_back({.name = "binary.div.scalar",
                   .fn = [](const Inputs& x) { return 3.0 / x[0] / 4.0; },
                   .inputs = unary_input(0.5, 2)});
  cases.push_back({.name = "binary.pow.scalar_base",
                   .fn = [](const Inputs& x) { return ember::pow(scalar_tensor(2.5, kFloat64), x[0]); },
                   .inputs = unary_input(-2, 2)});
  // A float32 operand promotes to float64; its gradient must come back as float32.
  cases.push_back({.name = "binary.mul.mixed_precision",
                   .fn = [](const Inputs& x) { return x[0] * x[1]; },
                   .inputs = {{.shape = {3, 4}, .dtype = kFloat32}, {.shape = {4}}}});
  // alpha scales in the promoted dtype; scaling the float32 operand in float32 first would round.
  cases.push_back({.name = "binary.add.mixed_precision",
                   .fn = [](const Inputs& x) { return x[0].add(x[1], 3); },
                   .inputs = {{.shape = {2, 3}}, {.shape = {2, 1}, .dtype = kFloat32}}});
  cases.push_back({.name = "binary.sub.mixed_precision",
                   .fn = [](const Inputs& x) { return x[0].sub(x[1], -0.3); },
                   .inputs = {{.shape = {3}, .dtype = kFloat32}, {.shape = {2, 3}}}});
}

void add_where(std::vector<GradCase>& cases) {
  // The condition comes from a third input; it gets no gradient (allow_unused reads it as zeros).
  auto fn = [](const Inputs& x) { return ember::where(positive(x[2]), x[0], x[1]); };
  cases.push_back(
      {.name = "where", .fn = fn, .inputs = {{.shape = {3, 4}}, {.shape = {3, 4}}, {.shape = {3, 4}, .avoid = {0}}}});
  cases.push_back(
      {.name = "where.broadcast",
       .fn = fn,
       .inputs = {{.shape = {3, 1}}, {.shape = {4}, .layout = Layout::Strided}, {.shape = {2, 3, 4}, .avoid = {0}}}});
  // A 0-dim CPU condition and operand with operands on the case's device.
  cases.push_back({.name = "where.host_scalar",
                   .fn = fn,
                   .inputs = {{.shape = {}, .on_host = true}, {.shape = {2, 3}}, {.shape = {2, 1}, .avoid = {0}}}});
  cases.push_back(
      {.name = "where.host_condition",
       .fn = fn,
       .inputs = {{.shape = {3}}, {.shape = {}, .on_host = true}, {.shape = {}, .avoid = {0}, .on_host = true}}});
  cases.push_back({.name = "where.one_sided",
                   .fn = [](const Inputs& x) { return ember::where(positive(x[0]), x[0].exp(), zeros({}, kFloat64)); },
                   .inputs = {{.shape = {5, 3}, .layout = Layout::Transposed, .avoid = {0}}}});
}

}  // namespace

void add_elementwise_cases(std::vector<GradCase>& cases) {
  add_unary(cases);
  add_binary(cases);
  add_where(cases);
}

}  // namespace ember::testing
