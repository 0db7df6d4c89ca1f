// Layer behaviour beyond shapes: batch norm's running statistics (momentum and PyTorch's
// cumulative momentum=None) and evaluation formula, dropout's rate and scaling, and the context in
// the errors a misused layer raises.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/ember_core.h"
#include "nn/nn.h"
#include "tests/autograd/test_util.h"

using namespace ember;
using namespace ember::testing;

namespace {

// Per-channel mean and unbiased variance of [N, C, L] float64 values.
std::pair<std::vector<double>, std::vector<double>> channel_stats(const Tensor& x) {
  const int64_t N = x.size(0), C = x.size(1), L = x.size(2);
  std::vector<double> v = x.to_vector<double>(), mean(C, 0.0), var(C, 0.0);
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t l = 0; l < L; ++l) mean[c] += v[(n * C + c) * L + l] / static_cast<double>(N * L);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t l = 0; l < L; ++l) var[c] += std::pow(v[(n * C + c) * L + l] - mean[c], 2);
    var[c] /= static_cast<double>(N * L - 1);
  }
  return {mean, var};
}

void check_close(const Tensor& actual, const std::vector<double>& expected) {
  std::vector<double> a = actual.to_vector<double>();
  REQUIRE(a.size() == expected.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(expected[i]).epsilon(1e-12));
}

}  // namespace

TEST_CASE("BatchNorm1d running statistics: exponential and cumulative averages", "[nn][batchnorm]") {
  for (bool cumulative : {false, true}) {
    INFO((cumulative ? "momentum=None" : "momentum=0.3"));
    nn::BatchNorm1d bn(nn::BatchNormOptions(3).momentum(cumulative ? std::nullopt : std::optional<double>(0.3)));
    bn->to(kFloat64);
    std::vector<double> mean(3, 0.0), var(3, 1.0);
    for (int step = 1; step <= 3; ++step) {
      Tensor x = randn({4, 3, 5}, TensorOptions(kFloat64)) * static_cast<double>(step) + static_cast<double>(step);
      bn(x);
      auto [batch_mean, batch_var] = channel_stats(x);
      const double m = cumulative ? 1.0 / step : 0.3;
      for (int c = 0; c < 3; ++c) {
        mean[c] = (1 - m) * mean[c] + m * batch_mean[c];
        var[c] = (1 - m) * var[c] + m * batch_var[c];
      }
      check_close(bn->running_mean, mean);
      check_close(bn->running_var, var);
      CHECK(bn->num_batches_tracked.item<int64_t>() == step);
    }
    // Evaluation normalises with the running statistics and leaves them alone.
    bn->eval();
    {
      NoGradGuard no_grad;
      bn->weight.copy_(tensor<double>({1.0, 2.0, 0.5}));
      bn->bias.copy_(tensor<double>({0.0, -1.0, 3.0}));
    }
    Tensor x = randn({2, 3, 4}, TensorOptions(kFloat64));
    std::vector<double> xs = x.to_vector<double>(), expected(xs.size());
    const double w[] = {1.0, 2.0, 0.5}, b[] = {0.0, -1.0, 3.0};
    for (size_t i = 0; i < xs.size(); ++i) {
      const size_t c = (i / 4) % 3;
      expected[i] = (xs[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * w[c] + b[c];
    }
    check_close(bn(x), expected);
    check_close(bn->running_mean, mean);
    CHECK(bn->num_batches_tracked.item<int64_t>() == 3);
  }
}

TEST_CASE("Dropout zeroes at rate p and scales the rest by 1 / (1 - p)", "[nn][dropout]") {
  manual_seed(12);
  nn::Dropout dropout(0.3);
  Tensor out = dropout(ones({200, 100}));
  std::vector<float> v = out.to_vector<float>();
  const double zeros = static_cast<double>(std::count(v.begin(), v.end(), 0.0f));
  const double n = static_cast<double>(v.size());
  CHECK(std::abs(zeros / n - 0.3) < 5 * std::sqrt(0.3 * 0.7 / n));
  for (float x : v) CHECK((x == 0.0f || x == Approx(1.0 / 0.7)));
  CHECK(nn::Dropout(0.0)(out).to_vector<float>() == v);
  CHECK(nn::Dropout(1.0)(ones({3})).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK_THAT(error_of([] { nn::Dropout(1.5); }), Catch::Contains("between 0 and 1"));
}

TEST_CASE("misused layers raise errors that name the layer and the shapes", "[nn][errors]") {
  CHECK_THAT(error_of([] {
               nn::BatchNorm2d(4)(randn({2, 3, 5, 5}));
             }),
             Catch::Contains("BatchNorm2d") && Catch::Contains("[2, 3, 5, 5]"));
  CHECK_THAT(error_of([] {
               nn::BatchNorm1d(4)(randn({2, 4, 5, 5}));
             }),
             Catch::Contains("BatchNorm1d") && Catch::Contains("2-D or 3-D"));
  CHECK_THAT(error_of([] { nn::Linear(3, 2)(randn({4, 5})); }), Catch::Contains("[4, 5]"));
  CHECK_THAT(error_of([] { nn::Conv2d(3, 2, 3)(randn({3, 8, 8})); }), Catch::Contains("[3, 8, 8]"));
  CHECK_THAT(error_of([] { nn::Conv2d(3, 2, 3)(randn({1, 4, 8, 8})); }), Catch::Contains("[1, 4, 8, 8]"));
  CHECK_THAT(error_of([] { nn::LayerNorm(Shape{4})(randn({2, 5})); }), Catch::Contains("[2, 5]"));
  CHECK_THAT(error_of([] { nn::Conv2d(nn::Conv2dOptions(3, 4, 3).groups(2)); }),
             Catch::Contains("divisible by groups"));
  CHECK_THAT(error_of([] { nn::Embedding(nn::EmbeddingOptions(5, 2).padding_idx(5)); }),
             Catch::Contains("padding_idx"));
  CHECK_THAT(error_of([] { nn::GELU("fast"); }), Catch::Contains("approximate"));
  CHECK_THAT(error_of([] { nn::ModuleList()->forward(randn({2})); }), Catch::Contains("ModuleList"));
  CHECK_THAT(error_of([] { nn::Sequential()->operator[](0); }), Catch::Contains("out of range"));
  CHECK_THAT(error_of([] { nn::ModuleDict()->at("x"); }), Catch::Contains("'x'"));
  CHECK_THAT(error_of([] { nn::Linear(nullptr)->reset(); }), Catch::Contains("empty module holder"));
}
