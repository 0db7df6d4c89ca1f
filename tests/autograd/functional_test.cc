// What the finite-difference table cannot check in autograd/functional.h: dropout's mask
// statistics and scaling, embedding's zero gradient for padding_idx, batch_norm's
// running-statistics update, and the fused batch_norm_relu against its two-op spelling in float32
// on tensors large enough to be split across threads.
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/functional.h"
#include "tests/autograd/test_util.h"

namespace ember::testing {
namespace {

TEST_CASE("dropout: identity in evaluation, mask * 1/(1-p) in training", "[functional]") {
  const double p = 0.3;
  Tensor x = full({200, 500}, 2.0, kFloat64).requires_grad_(true);
  CHECK(dropout(x, p, /*training=*/false).is_same(x));

  Generator generator(7);
  Tensor y = dropout(x, p, true, &generator);
  std::vector<double> out = values(y);
  int64_t zeroed = 0;
  for (double v : out) {
    if (v == 0.0)
      ++zeroed;
    else
      CHECK(v == Approx(2.0 / (1.0 - p)).epsilon(1e-15));
  }
  // 100,000 Bernoulli draws: the standard deviation of the zeroed fraction is about 0.0014.
  CHECK(static_cast<double>(zeroed) / out.size() == Approx(p).margin(0.01));

  y.sum().backward();
  std::vector<double> grad = values(x.grad());
  for (size_t i = 0; i < out.size(); ++i) CHECK(grad[i] == (out[i] == 0.0 ? 0.0 : 1.0 / (1.0 - p)));

  // The same seed gives the same mask; the next draw from one generator gives another.
  Generator again(7);
  CHECK(values(dropout(x, p, true, &again)) == out);
  CHECK(values(dropout(x, p, true, &again)) != out);
}

TEST_CASE("embedding: the padding_idx row gets no gradient, other rows are unchanged", "[functional]") {
  Tensor weight = leaf({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  Tensor indices = tensor(std::vector<int64_t>{2, 0, 2, 3, 1, 2}, {2, 3});
  Tensor upstream = f64({1, -1, 2, 0.5, -3, 4, 0.25, 1, 5, -2, 3, 3}, {2, 3, 2});
  Tensor out = embedding(weight, indices, 2);
  CHECK(values(out.select(0, 0).select(0, 0)) == std::vector<double>{5, 6});  // the forward still reads the row
  out.backward(upstream);
  CHECK(values(weight.grad()) == std::vector<double>{2, 0.5, 5, -2, 0, 0, 0.25, 1});

  Tensor plain = leaf({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  embedding(plain, indices).backward(upstream);
  CHECK(values(plain.grad()) == std::vector<double>{2, 0.5, 5, -2, 1, 6, 0.25, 1});
}

TEST_CASE("batch_norm: training updates running stats with momentum and the unbiased variance", "[functional]") {
  // Channel 0 holds {1, 3, 5, 7} (mean 4, biased var 5, unbiased 20/3); channel 1 holds {2, 2, 2, 2}.
  Tensor x = f64({1, 3, 2, 2, 5, 7, 2, 2}, {2, 2, 2});
  Tensor running_mean = f64({1, -1}, {2}), running_var = f64({2, 0.5}, {2});
  Tensor y = batch_norm(x, running_mean, running_var, {}, {}, /*training=*/true, /*momentum=*/0.25, /*eps=*/0.0);
  CHECK(values(running_mean)[0] == Approx(0.75 * 1 + 0.25 * 4));
  CHECK(values(running_mean)[1] == Approx(0.75 * -1 + 0.25 * 2));
  CHECK(values(running_var)[0] == Approx(0.75 * 2 + 0.25 * 20.0 / 3.0));
  CHECK(values(running_var)[1] == Approx(0.75 * 0.5));
  CHECK(values(y)[0] == Approx(-3 / std::sqrt(5.0)));

  // Evaluation reads the running stats and leaves them alone.
  Tensor before = running_mean.clone();
  Tensor z = batch_norm(x, running_mean, running_var, {}, {}, /*training=*/false, 0.25, 0.0);
  CHECK(values(running_mean) == values(before));
  CHECK(values(z)[0] == Approx((1 - values(running_mean)[0]) / std::sqrt(values(running_var)[0])));
}

}  // namespace
TEST_CASE("batch_norm_relu equals relu(batch_norm) in float32, channels-last and NCHW", "[functional]") {
  for (bool channels_last : {true, false}) {
    for (bool training : {true, false}) {
      INFO("channels_last " << channels_last << " training " << training);
      manual_seed(11);
      Tensor leaf = channels_last ? randn({6, 13, 11, 24}) : randn({6, 24, 13, 11});
      Tensor weight = rand({24}) + 0.5, bias = randn({24}) * 0.3;
      Tensor mean_a = randn({24}) * 0.1, var_a = rand({24}) + 0.5;
      Tensor mean_b = mean_a.clone(), var_b = var_a.clone();
      auto run = [&](bool fused, Tensor& mean, Tensor& var) {
        Tensor x = leaf.clone().requires_grad_(true), w = weight.clone().requires_grad_(true);
        Tensor b = bias.clone().requires_grad_(true);
        Tensor input = channels_last ? x.permute({0, 3, 1, 2}) : x;
        Tensor y = fused ? batch_norm_relu(input, mean, var, w, b, training)
                         : relu(batch_norm(input, mean, var, w, b, training));
        Tensor upstream = linspace(-1.0, 1.0, y.numel()).view(y.sizes());
        (y * upstream).sum().backward();
        return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
      };
      std::vector<Tensor> fused = run(true, mean_a, var_a), plain = run(false, mean_b, var_b);
      const char* names[] = {"output", "input grad", "weight grad", "bias grad"};
      for (int i = 0; i < 4; ++i) {
        INFO(names[i]);
        std::vector<double> a = values(fused[i]), b = values(plain[i]);
        REQUIRE(a.size() == b.size());
        for (size_t j = 0; j < a.size(); ++j) REQUIRE(std::abs(a[j] - b[j]) <= 1e-5 * (1 + std::abs(b[j])));
      }
      CHECK(values(mean_a) == values(mean_b));
      CHECK(values(var_a) == values(var_b));
    }
  }
}

}  // namespace ember::testing
