// Ember vs PyTorch 1.13 on the reference cases of tools/golden/make_golden.py: outputs, running
// statistics and every gradient must match to rtol 1e-4 in float32 (max pooling over NaNs and
// ties, whose values, indices and gradients are exact: to the bit). The cases run on
// tests/test_device.h's device: the CPU (golden_test) or emulated cuda:0 (golden_cuda_test).
#include <cmath>
#include <iterator>

#include <catch2/catch.hpp>

#include "autograd/functional.h"
#include "core/ember_core.h"
#include "core/io/safetensors.h"
#include "tests/test_device.h"

using namespace ember;
using test::kTestDevice;

namespace {

// A copy of the file's tensor on the test device that the case owns: it may become a leaf or be
// updated in place (running statistics), which must not reach the file's tensor.
Tensor owned_copy(const Tensor& reference) { return reference.clone().to(kTestDevice); }

// max |a - b| / (atol + rtol |b|) <= 1, reported with the worst element.
void require_close(const Tensor& actual, const Tensor& expected, const std::string& what, double rtol = 1e-4,
                   double atol = 1e-5) {
  INFO(what << ": shapes " << shape_str(actual.sizes()) << " vs " << shape_str(expected.sizes()) << ", on "
            << actual.device());
  REQUIRE(actual.device() == kTestDevice);
  REQUIRE(actual.sizes() == expected.sizes());
  std::vector<double> a = actual.to_vector<double>(), b = expected.to_vector<double>();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double ratio = std::abs(a[i] - b[i]) / (atol + rtol * std::abs(b[i]));
    if (ratio > worst) {
      worst = ratio;
      at = i;
    }
  }
  INFO(what << ": worst element " << at << ": " << (a.empty() ? 0 : a[at]) << " vs " << (b.empty() ? 0 : b[at]));
  REQUIRE(worst <= 1.0);
}

// Each element of `actual` equals `expected` exactly, a NaN matching a NaN.
void require_identical(const Tensor& actual, const Tensor& expected, const std::string& what) {
  INFO(what << ": shapes " << shape_str(actual.sizes()) << " vs " << shape_str(expected.sizes()));
  REQUIRE(actual.device() == kTestDevice);
  REQUIRE(actual.sizes() == expected.sizes());
  std::vector<double> a = actual.to_vector<double>(), b = expected.to_vector<double>();
  size_t differs = 0;
  while (differs < a.size() && (a[differs] == b[differs] || (std::isnan(a[differs]) && std::isnan(b[differs]))))
    ++differs;
  INFO(what << ": element " << differs << ": " << (differs < a.size() ? a[differs] : 0) << " vs "
            << (differs < a.size() ? b[differs] : 0));
  REQUIRE(differs == a.size());
}

}  // namespace

TEST_CASE("conv2d + batch_norm + relu + max_pool2d match PyTorch", "[golden]") {
  SafetensorsFile ref = load_safetensors("tests/golden/conv_bn_relu_pool.safetensors");
  Tensor x = owned_copy(ref.at("input")).requires_grad_();
  Tensor w = owned_copy(ref.at("weight")).requires_grad_();
  Tensor b = owned_copy(ref.at("bias")).requires_grad_();
  Tensor gamma = owned_copy(ref.at("gamma")).requires_grad_();
  Tensor beta = owned_copy(ref.at("beta")).requires_grad_();
  Tensor running_mean = owned_copy(ref.at("running_mean_before"));
  Tensor running_var = owned_copy(ref.at("running_var_before"));

  Tensor h = conv2d(x, w, b, 1, 1);
  h = batch_norm(h, running_mean, running_var, gamma, beta, true, 0.1, 1e-5);
  h = relu(h);
  Tensor out = max_pool2d(h, 3, Size2(2), 1);
  require_close(out, ref.at("output"), "output");
  require_close(running_mean, ref.at("running_mean_after"), "running_mean");
  require_close(running_var, ref.at("running_var_after"), "running_var");

  (out * ref.at("upstream").to(kTestDevice)).sum().backward();
  require_close(x.grad(), ref.at("grad_input"), "grad input");
  require_close(w.grad(), ref.at("grad_weight"), "grad weight");
  require_close(b.grad(), ref.at("grad_bias"), "grad bias");
  require_close(gamma.grad(), ref.at("grad_gamma"), "grad gamma");
  require_close(beta.grad(), ref.at("grad_beta"), "grad beta");
}

TEST_CASE("cross_entropy with label smoothing matches PyTorch", "[golden]") {
  SafetensorsFile ref = load_safetensors("tests/golden/cross_entropy_label_smoothing.safetensors");
  const Tensor target = ref.at("target").to(kTestDevice);

  SECTION("mean, ignore_index") {
    Tensor logits = owned_copy(ref.at("logits")).requires_grad_();
    Tensor loss = cross_entropy(logits, target, {}, Reduction::Mean, -100, 0.1);
    require_close(loss, ref.at("loss_mean"), "loss");
    loss.backward();
    require_close(logits.grad(), ref.at("grad_mean"), "grad");
  }
  SECTION("class weights") {
    Tensor logits = owned_copy(ref.at("logits")).requires_grad_();
    Tensor loss = cross_entropy(logits, target, ref.at("weight").to(kTestDevice), Reduction::Mean, -100, 0.1);
    require_close(loss, ref.at("loss_weighted"), "loss");
    loss.backward();
    require_close(logits.grad(), ref.at("grad_weighted"), "grad");
  }
  SECTION("no reduction") {
    Tensor logits = owned_copy(ref.at("logits")).requires_grad_();
    Tensor loss = cross_entropy(logits, target, {}, Reduction::None, -100, 0.1);
    require_close(loss, ref.at("loss_none"), "loss");
    (loss * ref.at("upstream").to(kTestDevice)).sum().backward();
    require_close(logits.grad(), ref.at("grad_none"), "grad");
  }
  SECTION("spatial targets") {
    Tensor logits = owned_copy(ref.at("spatial")).requires_grad_();
    Tensor loss = cross_entropy(logits, ref.at("spatial_target").to(kTestDevice), {}, Reduction::Mean, -100, 0.2);
    require_close(loss, ref.at("loss_spatial"), "loss");
    loss.backward();
    require_close(logits.grad(), ref.at("grad_spatial"), "grad");
  }
}

TEST_CASE("max_pool2d with several NaNs per window and ties matches PyTorch", "[golden]") {
  // tools/golden/make_golden.py's MAX_POOL_NAN_GEOMETRIES: kernel, stride, padding, dilation, ceil_mode.
  const struct {
    Size2 kernel, stride, padding, dilation;
    bool ceil_mode;
  } geometries[] = {
      {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {{3, 3}, {1, 1}, {1, 1}, {1, 1}, false},
      {{2, 3}, {1, 2}, {1, 1}, {2, 1}, true},
      {{3, 2}, {2, 1}, {1, 1}, {2, 3}, false},
  };
  SafetensorsFile ref = load_safetensors("tests/golden/max_pool_nans.safetensors");
  for (size_t k = 0; k < std::size(geometries); ++k) {
    const auto& g = geometries[k];
    const std::string key = std::to_string(k);
    for (bool channels_last : {false, true}) {
      INFO("geometry " << k << (channels_last ? ", channels-last input" : ""));
      Tensor x = owned_copy(ref.at("input"));
      if (channels_last) x = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
      x.requires_grad_();
      auto [out, indices] = max_pool2d_with_indices(x, g.kernel, g.stride, g.padding, g.dilation, g.ceil_mode);
      require_identical(out, ref.at("output." + key), "output");
      require_identical(indices, ref.at("indices." + key), "indices");
      out.backward(ref.at("upstream." + key).to(kTestDevice));
      require_identical(x.grad(), ref.at("grad_input." + key), "grad input");
    }
  }
}
