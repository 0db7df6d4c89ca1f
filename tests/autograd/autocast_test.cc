// Autocast (core/autocast.h) on the test device (tests/test_device.h: the CPU here, emulated cuda:0 in
// the cuda_test built from this source): the policy table against PyTorch's (the golden file
// tests/autograd/autocast_policy.txt), the table against what the ops do, the cast cache, gradients
// reaching float32 parameters, nesting, threads and the errors.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "autograd/functional.h"
#include "core/autocast.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "nn/nn.h"
#include "tests/test_device.h"

namespace ember::testing {
namespace {

using Catch::Matchers::Contains;
using test::kTestDevice;

const DeviceType kType = kTestDevice.type;
// The lower precision the tests autocast to: the one both backends take.
constexpr DType kLower = kBFloat16;

Tensor t(const Shape& shape, DType dtype = kFloat32) {
  return randn(shape, TensorOptions(kFloat32).device(kTestDevice)).to(dtype);
}
Tensor labels(std::initializer_list<int64_t> values) { return tensor<int64_t>(values).to(kTestDevice); }

// Ember's ops under PyTorch's names, as functions of their floating inputs' dtype: the same probes
// as tools/golden/make_autocast_golden.py's.
const std::map<std::string, std::function<Tensor(DType)>>& probes() {
  static const std::map<std::string, std::function<Tensor(DType)>> all = {
      {"conv2d",
       [](DType d) {
         return conv2d(t({1, 2, 5, 5}, d), t({3, 2, 3, 3}, d));
       }},
      {"linear",
       [](DType d) {
         return linear(t({2, 3}, d), t({4, 3}, d));
       }},
      {"matmul",
       [](DType d) {
         return matmul(t({2, 3}, d), t({3, 4}, d));
       }},
      {"mm",
       [](DType d) {
         return mm(t({2, 3}, d), t({3, 4}, d));
       }},
      {"bmm",
       [](DType d) {
         return bmm(t({2, 2, 3}, d), t({2, 3, 4}, d));
       }},
      {"cross_entropy",
       [](DType d) {
         return cross_entropy(t({2, 3}, d), labels({0, 2}));
       }},
      {"nll_loss",
       [](DType d) {
         return nll_loss(t({2, 3}, d), labels({0, 2}));
       }},
      {"mse_loss", [](DType d) { return mse_loss(t({3}, d), t({3}, d)); }},
      {"binary_cross_entropy_with_logits",
       [](DType d) { return binary_cross_entropy_with_logits(t({3}, d), t({3}, d).sigmoid()); }},
      {"prod", [](DType d) { return t({3}, d).prod(); }},
      {"exp", [](DType d) { return t({3}, d).exp(); }},
      {"expm1", [](DType d) { return t({3}, d).expm1(); }},
      {"log", [](DType d) { return t({3}, d).abs().log(); }},
      {"log1p", [](DType d) { return t({3}, d).abs().log1p(); }},
      {"reciprocal", [](DType d) { return t({3}, d).reciprocal(); }},
      {"rsqrt", [](DType d) { return t({3}, d).abs().rsqrt(); }},
      {"pow", [](DType d) { return t({3}, d).pow(2.0); }},
      {"softmax",
       [](DType d) {
         return softmax(t({2, 3}, d), 1);
       }},
      {"log_softmax",
       [](DType d) {
         return log_softmax(t({2, 3}, d), 1);
       }},
      {"layer_norm",
       [](DType d) {
         return layer_norm(t({2, 3}, d), {3});
       }},
      {"logsumexp", [](DType d) { return t({3}, d).logsumexp({0}); }},
      {"sum", [](DType d) { return t({3}, d).sum(); }},
      {"norm", [](DType d) { return t({3}, d).norm(); }},
      {"scatter_add",
       [](DType d) {
         return scatter_add(t({4}, d), 0, labels({0, 1}), t({2}, d));
       }},
      {"mean", [](DType d) { return t({3}, d).mean(); }},
      {"var", [](DType d) { return t({3}, d).var({0}); }},
      {"sqrt", [](DType d) { return t({3}, d).abs().sqrt(); }},
      {"add", [](DType d) { return t({3}, d) + t({3}, d); }},
      {"mul", [](DType d) { return t({3}, d) * t({3}, d); }},
      {"cat",
       [](DType d) {
         return cat({t({3}, d), t({3}, d)});
       }},
      {"stack",
       [](DType d) {
         return stack({t({3}, d), t({3}, d)});
       }},
      {"relu", [](DType d) { return relu(t({3}, d)); }},
      {"gelu", [](DType d) { return gelu(t({3}, d)); }},
      {"sigmoid", [](DType d) { return sigmoid(t({3}, d)); }},
      {"tanh", [](DType d) { return ember::tanh(t({3}, d)); }},
      {"max_pool2d",
       [](DType d) {
         return max_pool2d(t({1, 1, 4, 4}, d), 2);
       }},
      {"avg_pool2d",
       [](DType d) {
         return avg_pool2d(t({1, 1, 4, 4}, d), 2);
       }},
      {"adaptive_avg_pool2d",
       [](DType d) {
         return adaptive_avg_pool2d(t({1, 1, 4, 4}, d), 1);
       }},
      {"batch_norm",
       [](DType d) {
         Tensor stats = zeros({3}, TensorOptions(kFloat32).device(kTestDevice));
         Tensor scale = ones({3}, TensorOptions(kFloat32).device(kTestDevice));
         return batch_norm(t({2, 3, 4}, d), stats, scale.clone(), scale, stats.clone(), true);
       }},
      {"dropout", [](DType d) { return dropout(t({3}, d), 0.5); }},
      {"gather",
       [](DType d) {
         return gather(t({4}, d), 0, labels({0, 1}));
       }},
      {"embedding",
       [](DType d) {
         return embedding(t({3, 2}, d), labels({0, 1}));
       }},
  };
  return all;
}

std::string ember_policy(const std::string& op, DeviceType type) {
  for (const autocast::OpPolicy& row : autocast::policy_table())
    if (op == row.name) return autocast::policy_name(type == kCUDA ? row.cuda : row.cpu);
  return "none";
}

TEST_CASE("autocast's table is PyTorch's for every op Ember has", "[autocast]") {
  std::ifstream in("tests/autograd/autocast_policy.txt");
  REQUIRE(in.good());
  std::map<std::string, std::string> golden[kNumDeviceTypes];
  std::string line, version;
  while (std::getline(in, line)) {
    if (line.rfind("# Written", 0) == 0) version = line;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string device, op, policy;
    fields >> device >> op >> policy;
    golden[device == "cuda" ? 1 : 0][op] = policy;
  }
  INFO(version);
  REQUIRE(golden[0].size() == probes().size());
  for (DeviceType type : {kCPU, kCUDA}) {
    for (const auto& [op, policy] : golden[static_cast<int>(type)]) {
      INFO((type == kCUDA ? "cuda " : "cpu ") << op);
      CHECK(ember_policy(op, type) == policy);
    }
  }
  // Every row of the table is an op the golden file knows.
  for (const autocast::OpPolicy& row : autocast::policy_table()) CHECK(golden[0].count(row.name) == 1);
}

TEST_CASE("each op computes in the dtype its policy names", "[autocast]") {
  manual_seed(1);
  AutocastGuard guard(kType, kLower);
  for (const auto& [op, probe] : probes()) {
    INFO(op << " on " << kTestDevice.str());
    const std::string policy = ember_policy(op, kType);
    const DType from_float = probe(kFloat32).dtype();
    const DType from_lower = probe(kLower).dtype();
    if (policy == "lower_precision_fp") {
      CHECK(from_float == kLower);
      CHECK(from_lower == kLower);
    } else if (policy == "fp32") {
      CHECK(from_float == kFloat32);
      CHECK(from_lower == kFloat32);
    } else {  // none, or promote with inputs of one dtype: each op keeps its inputs' dtype
      CHECK(from_float == kFloat32);
      CHECK(from_lower == kLower);
    }
  }
  // float64 is never cast, as PyTorch leaves it.
  CHECK(mm(t({2, 3}, kFloat64), t({3, 2}, kFloat64)).dtype() == kFloat64);
}

TEST_CASE("ops that combine inputs compute in the widest", "[autocast]") {
  AutocastGuard guard(kType, kLower);
  Tensor lower = t({4}, kLower), wide = t({4});
  CHECK((lower + wide).dtype() == kFloat32);
  CHECK((lower * lower).dtype() == kLower);
  CHECK(cat({lower, wide}).dtype() == kFloat32);
  CHECK(stack({lower, wide}).dtype() == kFloat32);
  CHECK(where(lower.gt(zeros_like(lower)), lower, wide).dtype() == kFloat32);
  if (kType == kCUDA) CHECK(scatter_add(lower, 0, labels({0, 3}), t({2})).dtype() == kFloat32);
}

TEST_CASE("values: a lower-precision op is the float32 op on rounded inputs, within the dtype's epsilon",
          "[autocast]") {
  manual_seed(2);
  Tensor x = t({5, 7}), w = t({3, 7}), b = t({3});
  Tensor out;
  {
    AutocastGuard guard(kType, kLower);
    out = linear(x, w, b);
  }
  REQUIRE(out.dtype() == kLower);
  // The reference: inputs rounded to bf16 exactly as the casts do, the product in float64. Ember's
  // linear rounds the product to bf16, then the sum with the bias: one rounding (2^-8 relative) of each.
  Tensor product = matmul(x.to(kLower).to(kFloat64), w.to(kLower).to(kFloat64).t());
  Tensor reference = product + b.to(kLower).to(kFloat64);
  Tensor error = (out.to(kFloat64) - reference).abs();
  Tensor bound = (product.abs() + reference.abs()) * std::ldexp(1.0, -8) + 1e-6;
  CHECK((error - bound).max().item<double>() <= 0.0);
}

TEST_CASE("a weight is cast once per forward, and again after it changes", "[autocast]") {
  Tensor w = t({4, 3}).requires_grad_(true);
  Tensor x = t({2, 3});
  {
    AutocastGuard guard(kType, kLower);
    CHECK(autocast::cached_casts() == 0);
    Tensor a = linear(x, w);
    Tensor b = linear(x, w);
    CHECK(autocast::cached_casts() == 1);
    CHECK((a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>() == 0.0);
    {
      AutocastGuard inner(kType, kLower);
      linear(x, w);
    }
    CHECK(autocast::cached_casts() == 1);  // only the outermost guard clears the cache
    {
      NoGradGuard no_grad;
      w.mul_(2.0);  // an update in place inside the guard must not be hidden by the cache
    }
    Tensor c = linear(x, w);
    CHECK((c.to(kFloat64) - a.to(kFloat64) * 2.0).abs().max().item<double>() <=
          0.02 * a.to(kFloat64).abs().max().item<double>() + 1e-3);
    // Tensors that are not leaves requiring grad are cast each time and never cached.
    linear(x, w.detach());
    CHECK(autocast::cached_casts() == 1);
  }
  CHECK(autocast::cached_casts() == 0);
}

// PyTorch's users accumulate gradients (and a pipeline runs its micro-batches) under one guard: a
// backward without retain_graph frees the graph, cast weights included, so the next forward must
// not reuse a cached cast whose backward is gone.
TEST_CASE("several forwards and backwards under one guard accumulate gradients", "[autocast]") {
  Tensor w = t({4, 3}).requires_grad_(true);
  Tensor x = t({2, 3});
  AutocastGuard guard(kType, kLower);
  for (int pass = 0; pass < 2; ++pass) linear(x, w).sum().backward();
  // Each pass adds the column sums of x (computed in the lower precision) to every row.
  Tensor expected = x.to(kFloat64).sum({0}).expand({4, 3}) * 2.0;
  CHECK(w.grad().dtype() == kFloat32);
  CHECK((w.grad().to(kFloat64) - expected).abs().max().item<double>() <=
        0.02 * expected.abs().max().item<double>() + 1e-3);
}

TEST_CASE("gradients reach float32 parameters in float32", "[autocast]") {
  manual_seed(3);
  Tensor x = t({4, 2, 6, 6});
  Tensor w = (t({3, 2, 3, 3}) * 0.3).requires_grad_(true);
  Tensor gamma = ones({3}, TensorOptions(kFloat32).device(kTestDevice)).requires_grad_(true);
  Tensor beta = zeros({3}, TensorOptions(kFloat32).device(kTestDevice)).requires_grad_(true);
  Tensor fc = (t({5, 3}) * 0.3).requires_grad_(true);
  Tensor y = labels({0, 4, 2, 1});
  auto forward = [&](bool amp) {
    AutocastGuard guard(kType, kLower, amp);
    Tensor h = conv2d(x, w, {}, 1, 1);
    h = batch_norm_relu(h, {}, {}, gamma, beta, true);
    CHECK(h.dtype() == (amp ? kLower : kFloat32));  // batch norm keeps its input's dtype
    h = adaptive_avg_pool2d(h, 1).flatten(1);
    Tensor loss = cross_entropy(linear(h, fc), y);
    CHECK(loss.dtype() == kFloat32);
    loss.backward();  // inside the guard: backward formulas are never cast
    return loss;
  };
  Tensor amp_loss = forward(true);
  std::vector<Tensor> amp_grads = {w.grad(), gamma.grad(), beta.grad(), fc.grad()};
  for (Tensor p : {w, gamma, beta, fc}) p.mutable_grad() = Tensor();
  Tensor loss = forward(false);
  CHECK(amp_loss.item<double>() == Approx(loss.item<double>()).epsilon(0.02));
  std::vector<Tensor> grads = {w.grad(), gamma.grad(), beta.grad(), fc.grad()};
  for (size_t i = 0; i < grads.size(); ++i) {
    INFO("parameter " << i);
    CHECK(amp_grads[i].dtype() == kFloat32);
    const double scale = grads[i].abs().max().item<double>();
    const double diff = (amp_grads[i] - grads[i]).abs().max().item<double>();
    CHECK(diff <= 0.05 * scale + 1e-4);
  }
}

TEST_CASE("guards nest, disable, restore, and stay in their thread", "[autocast]") {
  CHECK_FALSE(is_autocast_enabled(kType));
  {
    AutocastGuard outer(kType, kLower);
    CHECK(is_autocast_enabled(kType));
    CHECK(autocast_dtype(kType) == kLower);
    {
      AutocastGuard off(kType, kLower, false);
      CHECK_FALSE(is_autocast_enabled(kType));
      CHECK(mm(t({2, 2}), t({2, 2})).dtype() == kFloat32);
    }
    CHECK(mm(t({2, 2}), t({2, 2})).dtype() == kLower);
    bool other_thread = true;
    std::thread([&] { other_thread = is_autocast_enabled(kType); }).join();
    CHECK_FALSE(other_thread);
    // In-place ops keep self's dtype.
    Tensor lower = t({3}, kLower);
    lower.add_(t({3}));
    CHECK(lower.dtype() == kLower);
  }
  CHECK_FALSE(is_autocast_enabled(kType));
  CHECK(default_autocast_dtype(kCPU) == kBFloat16);
  CHECK(default_autocast_dtype(kCUDA) == kFloat16);
}

TEST_CASE("a guard the device cannot autocast to raises", "[autocast]") {
  CHECK_THROWS_WITH(AutocastGuard(kCPU, kFloat16),
                    Contains("AutocastGuard") && Contains("bfloat16") && Contains("float16"));
  CHECK_THROWS_WITH(AutocastGuard(kCUDA, kFloat32), Contains("float16 or bfloat16") && Contains("float32"));
  CHECK_NOTHROW(AutocastGuard(kCPU, kFloat16, false));  // a disabled guard takes any dtype
}

}  // namespace
}  // namespace ember::testing
