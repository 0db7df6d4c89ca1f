// Backward accepts what the forward accepted: 0-dim CPU operands with tensors on the test device
// (tests/test_device.h: the CPU here, cuda:0 in the cuda_test built from this source) and operands
// of mixed dtypes. Each case also runs with the same dtypes on the CPU and all in float64 on the
// CPU; every gradient must come back with its input's shape, dtype and device, and match both.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "autograd/function.h"
#include "nn/nn.h"
#include "tests/autograd/test_util.h"
#include "tests/test_device.h"

namespace ember::testing {
namespace {

using Catch::Matchers::Contains;
using test::kTestDevice;
const Device kCpu(kCPU);

struct Operand {
  Shape shape;
  DType dtype = kFloat32;
  bool host = false;  // on the CPU whatever the test device
  bool requires_grad = true;
  double low = -1.0, high = 1.0;  // uniform; rounded to integers for an integer dtype
};

struct MixedCase {
  std::string name;
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  std::vector<Operand> operands;
};

// ---- the cases: every binary op and where over each mixed pair, then compositions ----

struct BinaryOp {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  double a_low, a_high, b_low, b_high;
};

std::vector<BinaryOp> binary_ops() {
  // Where's condition is a 0-dim CPU comparison when `a` is a host scalar, on a's device otherwise.
  auto where = [](const Tensor& a, const Tensor& b) {
    return ember::where(a.detach() > scalar_tensor(0.2, a.dtype()), a, b);
  };
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, -1, 1, -1, 1},
      {"add.alpha", [](const Tensor& a, const Tensor& b) { return a.add(b, 2.5); }, -1, 1, -1, 1},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, -1, 1, -1, 1},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, -1, 1, -1, 1},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, -1, 1, 0.5, 2},
      {"pow", [](const Tensor& a, const Tensor& b) { return a.pow(b); }, 0.5, 2, -2, 2},
      {"minimum", [](const Tensor& a, const Tensor& b) { return a.minimum(b); }, -1, 1, -1, 1},
      {"maximum", [](const Tensor& a, const Tensor& b) { return a.maximum(b); }, -1, 1, -1, 1},
      {"add_relu", [](const Tensor& a, const Tensor& b) { return add_relu(a, b); }, -1, 1, -1, 1},
      {"where", where, -1, 1, -1, 1},
  };
}

struct OperandPair {
  std::string name;
  Operand a, b;
};

// Every pair the forward accepts: PyTorch's promotion (a 0-dim operand of the same category does
// not widen a dimensioned one) and 0-dim CPU operands joining the test device.
std::vector<OperandPair> operand_pairs() {
  return {
      {"host_scalar", {.shape = {3, 4}}, {.shape = {}, .host = true}},
      {"host_scalar_no_grad", {.shape = {3, 4}}, {.shape = {}, .host = true, .requires_grad = false}},
      {"host_scalar_first", {.shape = {}, .host = true}, {.shape = {2, 3}}},
      {"host_float64_scalar", {.shape = {2, 3}}, {.shape = {}, .dtype = kFloat64, .host = true}},
      {"host_int_scalar", {.shape = {2, 3}}, {.shape = {}, .dtype = kInt64, .host = true, .requires_grad = false}},
      {"float64_scalar", {.shape = {2, 3}}, {.shape = {}, .dtype = kFloat64}},
      {"float32_float64", {.shape = {3, 4}}, {.shape = {4}, .dtype = kFloat64}},
      {"float_int", {.shape = {3, 4}}, {.shape = {4}, .dtype = kInt64, .requires_grad = false}},
      {"bfloat16_float32", {.shape = {3, 4}, .dtype = kBFloat16}, {.shape = {3, 1}}},
      {"float16_float32", {.shape = {2, 3}, .dtype = kFloat16}, {.shape = {3}}},
      {"bfloat16_host_scalar", {.shape = {3, 4}, .dtype = kBFloat16}, {.shape = {}, .host = true}},
  };
}

std::vector<MixedCase> compositions() {
  auto f32 = [](Shape shape, bool host = false) { return Operand{.shape = std::move(shape), .host = host}; };
  return {
      {"sum_of_host_scaled", [](const auto& x) { return (x[0] * x[1]).sum(); }, {f32({3, 4}), f32({}, true)}},
      {"mean_keepdim_of_host_power",
       [](const auto& x) { return x[0].pow(x[1]).mean({1}, true); },
       {{.shape = {3, 4}, .low = 0.5, .high = 2}, f32({}, true)}},
      {"amax_of_host_shifted", [](const auto& x) { return (x[0] - x[1]).amax({0}); }, {f32({3, 4}), f32({}, true)}},
      {"norm_of_host_scaled", [](const auto& x) { return (x[0] * x[1]).norm(2.0); }, {f32({5}), f32({}, true)}},
      {"clamp_of_host_scaled",
       [](const auto& x) { return (x[0] * x[1]).clamp(-0.3, 0.4); },
       {f32({3, 4}), f32({}, true)}},
      {"matmul_then_host_scale",
       [](const auto& x) { return x[0].matmul(x[1]) * x[2]; },
       {f32({3, 4}), f32({4, 2}), f32({}, true)}},
      {"matmul_then_float64_scale",
       [](const auto& x) { return x[0].matmul(x[1]) * x[2]; },
       {f32({3, 4}), f32({4, 2}), {.shape = {}, .dtype = kFloat64}}},
      // The case: a scalar computed by a CPU graph joins the device op, and the CPU
      // graph's backward (w * v) then needs its gradient on the CPU.
      {"cpu_graph_scalar",
       [](const auto& x) { return x[0] * (x[1] * x[2]).sum(); },
       {f32({2, 3}), f32({3}, true), f32({3}, true)}},
      {"inplace_host_scalars",
       [](const auto& x) {
         Tensor y = x[0] * 1.0;
         y.mul_(x[1]);
         y.add_(x[2]);
         return y;
       },
       {f32({2, 3}), f32({}, true), {.shape = {}, .dtype = kFloat64, .host = true}}},
      {"to_and_back",
       [](const auto& x) { return (x[0].to(kCpu) * x[1]).to(x[0].device()) * x[2]; },
       {f32({2, 3}), f32({3}, true), f32({}, true)}},
  };
}

std::vector<MixedCase> all_cases() {
  std::vector<MixedCase> cases;
  for (const BinaryOp& op : binary_ops()) {
    for (OperandPair pair : operand_pairs()) {
      pair.a.low = op.a_low, pair.a.high = op.a_high;
      pair.b.low = op.b_low, pair.b.high = op.b_high;
      auto fn = [f = op.fn](const std::vector<Tensor>& x) { return f(x[0], x[1]); };
      cases.push_back({op.name + "." + pair.name, fn, {pair.a, pair.b}});
    }
  }
  for (MixedCase& c : compositions()) cases.push_back(std::move(c));
  return cases;
}

// ---- running a case three ways ----

// Values exactly representable in each operand's dtype, as float64 on the CPU.
std::vector<Tensor> draw_values(const MixedCase& c) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the name: each case draws its own values
  for (char ch : c.name) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  std::mt19937_64 rng(h);
  std::vector<Tensor> out;
  for (const Operand& op : c.operands) {
    std::uniform_real_distribution<double> uniform(op.low, op.high);
    std::vector<double> v(static_cast<size_t>(shape_numel(op.shape)));
    for (double& x : v) x = is_floating(op.dtype) ? uniform(rng) : std::round(uniform(rng));
    out.push_back(tensor(v, {static_cast<int64_t>(v.size())}).reshape(op.shape).to(op.dtype).to(kFloat64));
  }
  return out;
}

struct Run {
  std::vector<Tensor> inputs;
  Tensor out;
};

// The case on `device` (host operands stay on the CPU), in the operands' dtypes or all in float64.
Run forward(const MixedCase& c, const std::vector<Tensor>& values, Device device, bool float64) {
  Run run;
  for (size_t i = 0; i < values.size(); ++i) {
    const Operand& op = c.operands[i];
    // clone(): a leaf of this run's own, even where no conversion copies `values[i]`.
    Tensor t = values[i].to(float64 ? kFloat64 : op.dtype).to(op.host ? kCpu : device).clone();
    if (op.requires_grad) t.requires_grad_(true);
    run.inputs.push_back(t);
  }
  run.out = c.fn(run.inputs);
  return run;
}

// Relative precision of a dtype's arithmetic, loosened for a few roundings in a formula.
double tolerance(DType dtype) {
  switch (dtype) {
    case kFloat64:
      return 1e-12;
    case kFloat32:
      return 2e-5;
    case kFloat16:
      return 4e-3;
    case kBFloat16:
      return 3e-2;
    default:
      return 0.0;
  }
}

void check_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  INFO(what);
  REQUIRE(got.sizes() == want.sizes());
  std::vector<double> g = values(got.to(kCpu)), w = values(want.to(kCpu));
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << w[i]);
    CHECK(std::abs(g[i] - w[i]) <= tol * (1.0 + std::abs(w[i])));
  }
}

void check_case(const MixedCase& c) {
  INFO("case " << c.name << " on " << kTestDevice.str());
  const std::vector<Tensor> values = draw_values(c);
  Run run = forward(c, values, kTestDevice, false);
  Run same_on_cpu = forward(c, values, kCpu, false);
  Run in_float64 = forward(c, values, kCpu, true);
  REQUIRE(run.out.requires_grad());
  // The forward's own rules: the promoted dtype, and the device of a non-host operand.
  CHECK(run.out.dtype() == same_on_cpu.out.dtype());
  bool all_host = true;
  for (const Operand& op : c.operands) all_host = all_host && op.host;
  CHECK(run.out.device() == (all_host ? kCpu : kTestDevice));

  // One upstream gradient, exact in the output's dtype, for all three runs.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> up(static_cast<size_t>(run.out.numel()));
  for (double& v : up) v = uniform(rng);
  const Tensor upstream = tensor(up, {run.out.numel()}).reshape(run.out.sizes()).to(run.out.dtype()).to(kFloat64);
  run.out.backward(upstream.to(run.out.dtype()).to(run.out.device()));
  same_on_cpu.out.backward(upstream.to(same_on_cpu.out.dtype()));
  in_float64.out.backward(upstream);

  const double out_tol = tolerance(run.out.dtype());
  check_close(run.out, same_on_cpu.out, out_tol, "output against the same dtypes on the CPU");
  check_close(run.out, in_float64.out, out_tol, "output against float64");
  for (size_t i = 0; i < c.operands.size(); ++i) {
    const Operand& op = c.operands[i];
    if (!op.requires_grad) continue;
    INFO("gradient of operand " << i);
    const Tensor& input = run.inputs[i];
    const Tensor& grad = input.grad();
    REQUIRE(grad.defined());
    CHECK(grad.sizes() == input.sizes());
    CHECK(dtype_name(grad.dtype()) == dtype_name(input.dtype()));
    CHECK(grad.device().str() == input.device().str());
    const double tol = std::max(out_tol, tolerance(op.dtype));
    check_close(grad, same_on_cpu.inputs[i].grad(), tol, "against the same dtypes on the CPU");
    check_close(grad, in_float64.inputs[i].grad(), tol, "against float64");
  }
}

TEST_CASE("mixed operands: every binary op and where over each mixed pair, and compositions", "[mixed]") {
  const std::vector<MixedCase> cases = all_cases();
  const size_t index = GENERATE_COPY(range(size_t{0}, cases.size()));
  check_case(cases[index]);
}

// ---- a model across devices, and errors raised in backward ----

// A model on the test device whose loss adds CPU terms, and a head placed on the CPU via to(): the
// gradients equal the same model's on the CPU alone, each on its parameter's device.
struct Placed {
  nn::Sequential body{nn::Linear(4, 8), nn::Tanh(), nn::Linear(8, 3)};
  nn::Linear head{3, 1};
  Placed(Device device) { body->to(device); }  // the head stays on the CPU

  Tensor loss(const Tensor& x, const Tensor& target) {
    const Device device = x.device();
    Tensor h = body->forward(x);
    Tensor scale = scalar_tensor(0.25, kFloat32);                  // a CPU constant
    Tensor penalty = (head->weight * head->weight).sum();          // computed on the CPU
    Tensor out = head->forward(h.to(kCpu)).mean();                 // the CPU head's output
    Tensor fit = (h - target.to(device)).pow(2.0).mean() * scale;  // on the device
    return fit + penalty * 0.01 + out;                             // CPU 0-dim terms join it
  }
};

TEST_CASE("mixed operands: a model on the test device whose loss adds CPU terms", "[mixed]") {
  manual_seed(5);
  Placed reference(kCpu);
  manual_seed(5);
  Placed placed(kTestDevice);
  manual_seed(6);
  Tensor x = randn({5, 4}), target = randn({5, 3});
  reference.loss(x, target).backward();
  Tensor loss = placed.loss(x.to(kTestDevice), target);
  CHECK(loss.device() == kTestDevice);
  loss.backward();
  auto want = reference.body->named_parameters(), got = placed.body->named_parameters();
  for (auto& [name, p] : reference.head->named_parameters()) want.emplace_back("head." + name, p);
  for (auto& [name, p] : placed.head->named_parameters()) got.emplace_back("head." + name, p);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    const Tensor& grad = got[i].second.grad();
    REQUIRE(grad.defined());
    CHECK(grad.device() == got[i].second.device());
    check_close(grad, want[i].second.grad(), tolerance(kFloat32), "against the model on the CPU");
  }
}

// A node whose backward fails, as a formula can.
class FailingBackward final : public autograd::Node {
 public:
  std::string name() const override { return "FailingBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { EMBER_FAIL("failing on purpose"); }
};

TEST_CASE("mixed operands: an error raised in backward names the forward op whose gradient failed", "[mixed]") {
  Tensor x = randn({3}, TensorOptions().device(kTestDevice)).requires_grad_(true);
  auto node = std::make_shared<FailingBackward>();
  autograd::connect(node, {&x});
  Tensor y;
  {
    NoGradGuard no_grad;
    y = x * 2.0;
  }
  y = autograd::attach(node, y);
  CHECK(error_of([&] { (y * 3.0).sum().backward(); }) == "backward of failing (FailingBackward0): failing on purpose");

  // A hook that hands mul's backward a gradient of another shape: mul's formula fails, and says so.
  Tensor w = randn({3}, TensorOptions().device(kTestDevice)).requires_grad_(true);
  Tensor z = w * w;
  z.register_hook([](const Tensor& g) { return zeros({4}, g.options()); });
  CHECK_THAT(error_of([&] { z.sum().backward(); }), Contains("backward of mul (MulBackward0): "));
}

// A node that returns a fixed gradient, as a formula might.
class FixedBackward final : public autograd::Node {
 public:
  explicit FixedBackward(Tensor grad) : grad_(std::move(grad)) {}
  std::string name() const override { return "FixedBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return {grad_}; }

 private:
  Tensor grad_;
};

Tensor through_fixed(const Tensor& x, const Tensor& grad) {
  auto node = std::make_shared<FixedBackward>(grad);
  autograd::connect(node, {&x});
  Tensor y;
  {
    NoGradGuard no_grad;
    y = x * 1.0;
  }
  return autograd::attach(node, y);
}

TEST_CASE("mixed operands: the engine gives each gradient its input's dtype and device, or names the node", "[mixed]") {
  // A formula computes in its output's dtype and device: a 0-dim gradient of another dtype or
  // device comes back as its input's.
  Tensor s = scalar_tensor(1.5, kFloat32).requires_grad_(true);
  through_fixed(s, scalar_tensor(2.0, kFloat64, kTestDevice)).backward();
  REQUIRE(s.grad().defined());
  CHECK(s.grad().dtype() == kFloat32);
  CHECK(s.grad().device() == kCpu);
  CHECK(s.grad().item<float>() == 2.0f);
  // Anything else is a wrong formula, named.
  Tensor x = zeros({3}, TensorOptions().device(kTestDevice)).requires_grad_(true);
  CHECK(error_of([&] { through_fixed(x, ones({2}, TensorOptions().device(kTestDevice))).sum().backward(); }) ==
        "backward of fixed (FixedBackward0): returned a gradient of shape [2] for input 0, of shape [3]");
}

}  // namespace
}  // namespace ember::testing
