// gradcheck(): builds each input leaf in its layout on the device, perturbs one element at a
// time for central differences, and compares with autograd::grad and with backward().
#include "tests/autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "autograd/engine.h"

namespace ember::testing {

namespace {

// The dim an Expanded input is broadcast along: the first one with more than one element.
int64_t expanded_dim(const Shape& shape) {
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1) return static_cast<int64_t>(d);
  return -1;
}

Shape leaf_shape(const InputSpec& spec) {
  Shape shape = spec.shape;
  int64_t d = expanded_dim(shape);
  if (spec.layout == Layout::Expanded && d >= 0) shape[d] = 1;
  return shape;
}

double round_to(DType dtype, double v) { return dtype == kFloat32 ? static_cast<double>(static_cast<float>(v)) : v; }

std::vector<double> sample(const InputSpec& spec, const Shape& shape, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(spec.low, spec.high);
  std::vector<double> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = spec.distinct ? spec.low + (spec.high - spec.low) * (i + 0.5) / values.size() : uniform(rng);
  if (spec.distinct) std::shuffle(values.begin(), values.end(), rng);
  for (double& v : values) {
    for (double kink : spec.avoid) {
      // Push away from the kink, staying on the side the sample fell on.
      if (std::abs(v - kink) < kAvoidMargin) v = kink + (v < kink ? -kAvoidMargin : kAvoidMargin);
    }
    v = round_to(spec.dtype, v);
  }
  for (int64_t i : spec.zeros_at) values.at(static_cast<size_t>(i)) = 0.0;
  return values;
}

// A fresh leaf holding `values` (row-major over `shape`) on `device` (the CPU for an on_host
// spec), laid out as spec says. detach() makes it a leaf of its own rather than a view of the
// buffer that gives it its strides.
Tensor make_leaf(const std::vector<double>& values, const Shape& shape, const InputSpec& spec, Device device) {
  NoGradGuard no_grad;
  if (spec.on_host) device = Device(kCPU);
  Tensor logical = tensor(values, {static_cast<int64_t>(values.size())}).reshape(shape).to(spec.dtype);
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (spec.layout == Layout::Transposed && rank >= 2) {
    std::vector<int64_t> reversed;
    for (int64_t d = rank - 1; d >= 0; --d) reversed.push_back(d);
    return logical.permute(reversed).contiguous().to(device).permute(reversed).detach();
  }
  if (spec.layout == Layout::Strided && rank >= 1) {
    Shape wide = shape;
    wide.back() *= 2;
    Tensor buffer = full(wide, 1e30, TensorOptions(spec.dtype));  // the skipped elements must never be read
    copy_into(buffer.slice(-1, 0, wide.back(), 2), logical);
    return buffer.to(device).slice(-1, 0, wide.back(), 2).detach();
  }
  return logical.to(device).detach();
}

Tensor as_input(const Tensor& leaf, const InputSpec& spec) {
  return spec.layout == Layout::Expanded && leaf.sizes() != spec.shape ? leaf.expand(spec.shape) : leaf;
}

std::vector<double> host_values(const Tensor& t) { return t.to(Device(kCPU)).to(kFloat64).to_vector<double>(); }

class Checker {
 public:
  Checker(const GradCase& c, Device device, uint64_t seed) : case_(c), device_(device) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a of the name: each case draws its own values
    for (char ch : c.name) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    rng_.seed(seed ^ h);
    for (const InputSpec& spec : c.inputs) {
      shapes_.push_back(leaf_shape(spec));
      values_.push_back(sample(spec, shapes_.back(), rng_));
    }
  }

  GradCheckResult run() {
    std::vector<Tensor> leaves;
    Inputs inputs;
    for (size_t i = 0; i < case_.inputs.size(); ++i) {
      leaves.push_back(make_leaf(values_[i], shapes_[i], case_.inputs[i], device_).requires_grad_(true));
      inputs.push_back(as_input(leaves.back(), case_.inputs[i]));
    }
    Tensor out = case_.fn(inputs);
    if (!out.requires_grad()) return fail("the output does not require grad");
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    upstream_.resize(static_cast<size_t>(out.numel()));
    for (double& v : upstream_) v = round_to(out.dtype(), uniform(rng_));
    Tensor upstream = tensor(upstream_, {out.numel()}).reshape(out.sizes()).to(out.dtype()).to(out.device());

    std::vector<Tensor> from_grad = autograd::grad({out}, leaves, {upstream}, /*retain_graph=*/true,
                                                   /*allow_unused=*/true);
    for (size_t i = 0; i < leaves.size(); ++i)
      if (leaves[i].grad().defined()) return fail("autograd::grad wrote .grad of input " + std::to_string(i));
    out.backward(upstream);
    for (size_t i = 0; i < leaves.size(); ++i) {
      check_gradient(i, "autograd::grad", from_grad[i], leaves[i]);
      check_gradient(i, "backward", leaves[i].grad(), leaves[i]);
    }
    for (size_t i = 0; i < leaves.size() && result_.ok; ++i)
      compare(i, host_or_zeros(from_grad[i], i), host_or_zeros(leaves[i].grad(), i));
    return result_;
  }

 private:
  GradCheckResult fail(const std::string& why) {
    result_.ok = false;
    result_.message += case_.name + ": " + why + "\n";
    return result_;
  }

  // An input the output does not depend on gets no gradient at all; that reads as zeros.
  std::vector<double> host_or_zeros(const Tensor& g, size_t input) {
    if (!g.defined()) return std::vector<double>(values_[input].size(), 0.0);
    return host_values(g);
  }

  void check_gradient(size_t i, const char* via, const Tensor& g, const Tensor& leaf) {
    if (!g.defined()) return;
    std::ostringstream why;
    if (g.sizes() != leaf.sizes()) why << "shape " << shape_str(g.sizes()) << " != " << shape_str(leaf.sizes());
    if (g.dtype() != leaf.dtype()) why << "dtype " << dtype_name(g.dtype()) << " != " << dtype_name(leaf.dtype());
    if (g.device() != leaf.device()) why << "device " << g.device().str() << " != " << leaf.device().str();
    if (!why.str().empty()) fail(std::string(via) + " gradient of input " + std::to_string(i) + ": " + why.str());
  }

  // d(upstream . f) / d(input i, element j) by central differences. The difference is taken
  // per output element before the dot product, so unaffected elements cancel exactly.
  double numeric(size_t i, size_t j) {
    const InputSpec& spec = case_.inputs[i];
    const double x = values_[i][j];
    const double plus = round_to(spec.dtype, x + case_.eps), minus = round_to(spec.dtype, x - case_.eps);
    std::vector<double> y_plus = evaluate(i, j, plus), y_minus = evaluate(i, j, minus);
    double total = 0.0;
    for (size_t k = 0; k < upstream_.size(); ++k) total += upstream_[k] * (y_plus[k] - y_minus[k]);
    return total / (plus - minus);
  }

  std::vector<double> evaluate(size_t i, size_t j, double value) {
    NoGradGuard no_grad;
    Inputs inputs;
    for (size_t k = 0; k < case_.inputs.size(); ++k) {
      std::vector<double> values = values_[k];
      if (k == i) values[j] = value;
      inputs.push_back(as_input(make_leaf(values, shapes_[k], case_.inputs[k], device_), case_.inputs[k]));
    }
    return host_values(case_.fn(inputs));
  }

  void compare(size_t i, const std::vector<double>& via_grad, const std::vector<double>& via_backward) {
    int reported = 0;
    for (size_t j = 0; j < values_[i].size(); ++j) {
      const double expected = numeric(i, j);
      const double tolerance = case_.atol + case_.rtol * std::abs(expected);
      const bool grad_ok = std::abs(via_grad[j] - expected) <= tolerance;
      const bool backward_ok = std::abs(via_backward[j] - expected) <= tolerance;
      if (grad_ok && backward_ok) continue;
      result_.ok = false;
      if (reported++ < 4) {
        std::ostringstream line;
        line.precision(12);
        line << case_.name << ": input " << i << " " << shape_str(shapes_[i]) << " element " << j
             << " (x = " << values_[i][j] << "): finite difference " << expected << ", autograd::grad " << via_grad[j]
             << ", backward " << via_backward[j] << "\n";
        result_.message += line.str();
      }
    }
  }

  const GradCase& case_;
  Device device_;
  std::mt19937_64 rng_;
  std::vector<Shape> shapes_;
  std::vector<std::vector<double>> values_;
  std::vector<double> upstream_;
  GradCheckResult result_;
};

}  // namespace

GradCheckResult gradcheck(const GradCase& c, Device device, uint64_t seed) {
  try {
    return Checker(c, device, seed).run();
  } catch (const std::exception& e) {
    return {false, c.name + ": raised: " + e.what() + "\n"};
  }
}

}  // namespace ember::testing
