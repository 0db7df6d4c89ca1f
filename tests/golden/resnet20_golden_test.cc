// ResNet-20 (option A) forward and backward on a fixed batch vs PyTorch 1.13 (data from
// tools/golden/make_golden.py resnet20). Weights and inputs are rebuilt here from the same
// integer hash (the input's key is read from the file); outputs and gradients must agree to rtol
// 1e-4 in float32. The network runs on tests/test_device.h's device: the CPU
// (resnet20_golden_test) or emulated cuda:0 (resnet20_golden_cuda_test).
#include <catch2/catch.hpp>
#include <cmath>

#include "core/ember_core.h"
#include "core/io/safetensors.h"
#include "models/resnet.h"
#include "tests/test_device.h"

using namespace ember;
using test::kTestDevice;

namespace {

// make_golden.py's hashed_uniform: values in [-0.5, 0.5) from integer arithmetic only.
std::vector<double> hashed_uniform(int64_t count, int64_t key) {
  std::vector<double> out(count);
  for (int64_t i = 0; i < count; ++i) {
    int64_t h = (i * 2654435761LL + key * 40503 + 12345) % 4294967296LL;
    h = (h * 1103515245LL + 12345) % 4294967296LL;
    out[i] = static_cast<double>(h) / 4294967296.0 - 0.5;
  }
  return out;
}

Tensor from_doubles(const std::vector<double>& values, const Shape& shape) {
  return tensor(values, shape).to(kFloat32);
}

void require_close(const Tensor& actual, const Tensor& expected, const std::string& what) {
  INFO(what << " on " << actual.device());
  REQUIRE(actual.device() == kTestDevice);
  REQUIRE(actual.sizes() == expected.sizes());
  std::vector<double> a = actual.to_vector<double>(), b = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(what << " element " << i << ": " << a[i] << " vs " << b[i]);
    REQUIRE(std::abs(a[i] - b[i]) <= 1e-5 + 1e-4 * std::abs(b[i]));
  }
}

}  // namespace

TEST_CASE("ResNet-20 forward and backward match PyTorch", "[golden][models]") {
  SafetensorsFile ref = load_safetensors("tests/golden/resnet20.safetensors");
  models::ResNet net = models::resnet20(3, 10);
  auto params = net->named_parameters();
  REQUIRE(params.size() == 59);  // stem conv + bn, 9 blocks x (2 conv + 2 bn), fc
  {
    NoGradGuard no_grad;
    for (size_t k = 0; k < params.size(); ++k) {
      auto& [name, p] = params[k];
      std::vector<double> u = hashed_uniform(p.numel(), static_cast<int64_t>(k));
      bool is_bn = name.find("bn") != std::string::npos;
      double fan_in = p.dim() > 1 ? static_cast<double>(p.numel() / p.size(0)) : static_cast<double>(p.numel());
      for (double& v : u) {
        if (is_bn)
          v = name.ends_with("weight") ? 1.0 + 0.2 * v : 0.2 * v;
        else
          v = v * std::sqrt(12.0 / fan_in);
      }
      p.copy_(from_doubles(u, p.sizes()));
    }
  }
  net->to(kTestDevice);  // moves each parameter's data: the handles in `params` stay valid
  // The script chose the input key so that no ReLU input lies within float32 rounding of zero.
  const Tensor& reference_input = ref.at("input");
  std::vector<double> pixels = hashed_uniform(reference_input.numel(), ref.at("input_key").item<int64_t>());
  for (double& v : pixels) v *= 2.0;
  Tensor x = from_doubles(pixels, reference_input.sizes()).to(kTestDevice);
  require_close(x, ref.at("input"), "input");

  Tensor logits = net->forward(x);
  require_close(logits, ref.at("logits"), "logits");
  Tensor loss = cross_entropy(logits, ref.at("labels").to(kTestDevice));
  require_close(loss, ref.at("loss"), "loss");
  require_close(net->bn1->running_mean, ref.at("running_mean_bn1"), "bn1.running_mean");
  require_close(net->bn1->running_var, ref.at("running_var_bn1"), "bn1.running_var");

  loss.backward();
  int full = 0, projected = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    auto& [name, p] = params[k];
    INFO("parameter " << name);
    REQUIRE(p.grad().defined());
    if (const Tensor* g = ref.find("grad." + name)) {
      require_close(p.grad(), *g, "grad " + name);
      ++full;
      continue;
    }
    // Large gradients: compare 8 signed projections, each to 1e-4 of sum |g|.
    REQUIRE(p.grad().device() == kTestDevice);
    std::vector<double> g = p.grad().to_vector<double>();
    std::vector<double> expected = ref.at("proj." + name).to_vector<double>();
    std::vector<double> scale = ref.at("absproj." + name).to_vector<double>();
    for (int j = 0; j < 8; ++j) {
      std::vector<double> sign = hashed_uniform(p.numel(), 5000 + 100 * static_cast<int64_t>(k) + j);
      double dot = 0;
      for (size_t i = 0; i < g.size(); ++i) dot += g[i] * (sign[i] > 0 ? 1.0 : (sign[i] < 0 ? -1.0 : 0.0));
      INFO("projection " << j << ": " << dot << " vs " << expected[j] << " (scale " << scale[j] << ")");
      REQUIRE(std::abs(dot - expected[j]) <= 1e-4 * scale[j] + 1e-6);
    }
    ++projected;
  }
  CHECK(full + projected == 59);
  CHECK(projected > 0);
}
