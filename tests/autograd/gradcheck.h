// Finite-difference gradient checking: a GradCase (one op under test) and gradcheck(), which
// compares central differences in float64 with the vector-Jacobian products that both
// ember::autograd::grad and Tensor::backward compute, on any Device.
//
//   GradCase c{.name = "unary.exp", .fn = [](const Inputs& x) { return x[0].exp(); },
//              .inputs = {{.shape = {3, 1, 5}}}};
//   GradCheckResult r = gradcheck(c, ember::Device(ember::kCPU));   // r.ok, r.message
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/ember_core.h"

namespace ember::testing {

// How an input leaf is laid out in memory. Kernels and formulas must not assume contiguity.
enum class Layout : uint8_t {
  Contiguous,
  Transposed,  // all dims reversed in memory (strides descending toward dim 0 no longer hold)
  Strided,     // every other element of a larger buffer along the last dim
  Expanded,    // the leaf has size 1 in its first dim of size > 1; the op sees it expanded
};

struct InputSpec {
  Shape shape;
  double low = -1.0, high = 1.0;  // values are uniform in [low, high]
  Layout layout = Layout::Contiguous;
  // Kinks of the op (0 for abs, clamp bounds, integers for floor): sampled values closer than
  // kAvoidMargin are moved away, so the finite difference never straddles one.
  std::vector<double> avoid = {};
  std::vector<int64_t> zeros_at = {};  // flat indices (row-major, logical) set to exactly 0
  // A shuffled even grid over [low, high] instead of uniform draws: no two values lie closer than
  // (high - low) / numel, so a max or a sort never changes winner under the finite difference.
  bool distinct = false;
  DType dtype = kFloat64;  // kFloat32 leaves test the cast back of the gradient
  // A leaf kept on the CPU whatever device the case runs on: a 0-dim scalar joining an op on a
  // GPU, or a CPU subgraph whose 0-dim result does; the forward accepts that (as PyTorch does), so
  // the backward must too.
  bool on_host = false;
};

using Inputs = std::vector<Tensor>;

struct GradCase {
  std::string name;  // "family.op[.variant]"; the family groups the Catch2 test cases
  std::function<Tensor(const Inputs&)> fn;
  std::vector<InputSpec> inputs;
  // Loosened only where the forward itself rounds (a trip through float32); see the case.
  double eps = 1e-6, rtol = 1e-6, atol = 1e-8;
};

struct GradCheckResult {
  bool ok = true;
  std::string message;  // what differed, where, and by how much
};

constexpr double kAvoidMargin = 1e-2;

// Runs `c` on `device`: inputs drawn from `seed` and the case name, one random upstream gradient,
// the analytic gradients from autograd::grad (which must leave every .grad untouched) and from
// backward() into .grad, both against central differences.
GradCheckResult gradcheck(const GradCase& c, Device device, uint64_t seed = 0);

// The table of every case (tests/autograd/cases_*.cc), reusable by any backend's test.
const std::vector<GradCase>& grad_cases();

}  // namespace ember::testing
