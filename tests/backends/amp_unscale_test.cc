// amp_unscale_ (core/amp_unscale.h) on every backend: grads of the four float dtypes, odd sizes
// across the CUDA kernel's chunks, a transposed one and an empty one, unscaled in place to the bit
// of a float64 reference that rounds as PyTorch does (once to float32 for 16-bit grads, then to
// the grad's dtype); the found-inf flag set by one inf or NaN anywhere, the last element of the
// last grad included; inv_scale on the host or on the device; one flag per device, in order.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/amp_unscale.h"
#include "core/ember_core.h"
#include "core/half.h"
#include "tests/backends/backends.h"

using namespace ember;
using namespace ember::test;

namespace {

struct GradSpec {
  DType dtype;
  Shape shape;
  bool transposed = false;  // a dense grad whose strides are not row-major (as Linear's weight grads)
};

// Longer than the CUDA kernel's 2048-element chunks, and shorter; the empty grad has no chunk.
const std::vector<GradSpec> kSpecs = {{kFloat32, {7}},   {kBFloat16, {3, 5}},      {kFloat64, {2049}},
                                      {kFloat16, {1}},   {kFloat32, {0}},          {kFloat32, {4100}},
                                      {kBFloat16, {33}}, {kFloat32, {5, 3}, true}, {kFloat16, {3, 11}}};

// The specs' grads on the CPU, drawn once (every check copies them to its device).
const std::vector<Tensor>& host_grads() {
  static const std::vector<Tensor> grads = [] {
    std::vector<Tensor> all;
    for (size_t i = 0; i < kSpecs.size(); ++i) {
      Generator g(100 + i);
      all.push_back((randn(kSpecs[i].shape, TensorOptions(kFloat64), &g) * 1000.0).to(kSpecs[i].dtype));
    }
    return all;
  }();
  return grads;
}

// A copy of `host` on `device` (a new one on the CPU too: the kernel writes it).
Tensor to_device(const Tensor& host, const GradSpec& spec, Device device) {
  if (spec.transposed) return host.t().contiguous().to(device).t();
  return device.is_cpu() ? host.clone() : host.to(device);
}

// What PyTorch's kernel makes of one element: the product in float32 (float64 for float64 grads),
// rounded to the grad's dtype.
double expected_value(double value, float inv_scale, DType dtype) {
  switch (dtype) {
    case kFloat64:
      return value * static_cast<double>(inv_scale);
    case kFloat32:
      return static_cast<float>(value * static_cast<double>(inv_scale));  // the exact product, rounded once
    case kBFloat16:
      return static_cast<float>(BFloat16(static_cast<float>(value * static_cast<double>(inv_scale))));
    default:
      return static_cast<float>(Half(static_cast<float>(value * static_cast<double>(inv_scale))));
  }
}

bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

struct Injection {
  size_t grad;  // into kSpecs
  int64_t index;
  double value;
};

// One call over the specs' grads on `device`, with `injection` written into a grad first.
void check_unscale(Device device, const Tensor& inv_scale, const std::optional<Injection>& injection) {
  const float inv = inv_scale.to(Device(kCPU)).item<float>();
  std::vector<Tensor> grads;
  std::vector<std::vector<double>> before;
  for (size_t i = 0; i < kSpecs.size(); ++i) {
    Tensor host = host_grads()[i];
    if (injection && injection->grad == i) {
      host = host.clone();
      Tensor element = host;
      int64_t index = injection->index;
      while (element.dim() > 0) {  // element `index` in row-major order
        const int64_t inner = element.numel() / element.size(0);
        element = element.select(0, index / inner);
        index %= inner;
      }
      element.fill_(injection->value);
    }
    grads.push_back(to_device(host, kSpecs[i], device));
    before.push_back(host.to(kFloat64).to_vector<double>());
  }
  std::vector<Tensor> found = amp_unscale_(grads, inv_scale);
  REQUIRE(found.size() == 1);
  REQUIRE(found[0].device() == device);
  REQUIRE(found[0].dtype() == kFloat32);
  REQUIRE(found[0].to(Device(kCPU)).item<float>() == (injection ? 1.0f : 0.0f));
  for (size_t i = 0; i < grads.size(); ++i) {
    INFO("grad " << i << " (" << dtype_name(kSpecs[i].dtype) << " " << shape_str(kSpecs[i].shape) << ")");
    REQUIRE(grads[i].dtype() == kSpecs[i].dtype);
    const std::vector<double> after = grads[i].to(Device(kCPU)).to(kFloat64).to_vector<double>();
    REQUIRE(after.size() == before[i].size());
    size_t mismatches = 0, first = 0;
    for (size_t e = 0; e < after.size(); ++e)
      if (!same_value(after[e], expected_value(before[i][e], inv, kSpecs[i].dtype)) && mismatches++ == 0) first = e;
    if (mismatches > 0)
      FAIL(mismatches << " elements differ; the first, " << first << ": " << before[i][first] << " -> " << after[first]
                      << ", expected " << expected_value(before[i][first], inv, kSpecs[i].dtype));
  }
}

}  // namespace

TEST_CASE("backend_ops: amp_unscale_ unscales float grads to the bit and flags any inf or NaN", "[amp]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Injection> injections = {
      {0, 0, inf},      // the first element of the first grad
      {1, 7, nan},      // bfloat16
      {2, 2048, -inf},  // float64, past the first chunk
      {3, 0, nan},      // float16
      {5, 4099, inf},   // the last element of a grad of three chunks
      {7, 4, nan},      // transposed
      {8, 32, -inf},    // the last element of the last grad
  };
  for (const Backend& backend : all_backends()) {
    const Device device = backend.device;
    INFO("backend " << device.str());
    const Tensor host_inv = full({}, static_cast<float>(1.0 / 3000.0), kFloat32);
    check_unscale(device, host_inv, std::nullopt);
    check_unscale(device, host_inv.to(device).reshape({1}), std::nullopt);  // read on the device
    for (const Injection& injection : injections) {
      INFO("injected " << injection.value << " into grad " << injection.grad << " at " << injection.index);
      check_unscale(device, host_inv, injection);
    }
    if (device.is_cpu()) continue;
    // Grads on the CPU and on this device: a flag for each, in order of first appearance.
    Tensor on_cpu = full({3}, 2.0f), on_device = full({5}, 4.0f, TensorOptions().device(device)),
           more_on_cpu = full({2}, inf);
    std::vector<Tensor> found = amp_unscale_({on_cpu, on_device, more_on_cpu}, host_inv.to(device));
    REQUIRE(found.size() == 2);
    REQUIRE(found[0].device().is_cpu());
    REQUIRE(found[1].device() == device);
    REQUIRE(found[0].item<float>() == 1.0f);
    REQUIRE(found[1].to(Device(kCPU)).item<float>() == 0.0f);
    REQUIRE(on_device.to(Device(kCPU)).to_vector<float>()[4] == 4.0f * static_cast<float>(1.0 / 3000.0));
  }
}
