// The loss modules against naive float64 loops written here from PyTorch's documented formulas:
// CrossEntropyLoss (class weights, ignore_index, label smoothing, spatial targets), NLLLoss,
// MSELoss and BCEWithLogitsLoss (weight, pos_weight), each with reductions none, mean and sum.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "core/ember_core.h"
#include "nn/nn.h"
#include "tests/autograd/gradcheck.h"

using namespace ember;
using namespace ember::testing;

namespace {

std::vector<double> draw(size_t n, double low, double high, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<double> v(n);
  for (double& x : v) x = uniform(rng);
  return v;
}

// PyTorch's reductions of per-element losses: mean divides by the summed weights (the count when
// unweighted).
std::vector<double> reduce(const std::vector<double>& losses, double weight_sum, Reduction reduction) {
  if (reduction == Reduction::None) return losses;
  double total = 0;
  for (double l : losses) total += l;
  return {reduction == Reduction::Sum ? total : total / weight_sum};
}

void require_close(const Tensor& actual, const std::vector<double>& expected) {
  std::vector<double> a = actual.to_vector<double>();
  REQUIRE(a.size() == expected.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    CHECK(a[i] == Approx(expected[i]).epsilon(1e-12).margin(1e-14));
  }
}

// log_softmax of row n of [N, C, L] logits at position l.
std::vector<double> log_softmax_at(const std::vector<double>& x, int64_t C, int64_t L, int64_t n, int64_t l) {
  double max = -INFINITY;
  for (int64_t c = 0; c < C; ++c) max = std::max(max, x[(n * C + c) * L + l]);
  double sum = 0;
  for (int64_t c = 0; c < C; ++c) sum += std::exp(x[(n * C + c) * L + l] - max);
  std::vector<double> out(C);
  for (int64_t c = 0; c < C; ++c) out[c] = x[(n * C + c) * L + l] - max - std::log(sum);
  return out;
}

constexpr Reduction kReductions[] = {Reduction::None, Reduction::Mean, Reduction::Sum};

}  // namespace

TEST_CASE("CrossEntropyLoss: weights, ignore_index, label smoothing and spatial targets", "[nn][loss]") {
  const int64_t N = 5, C = 4, L = 3;
  std::vector<double> logits = draw(N * C * L, -3, 3, 1);
  for (int64_t c = 0; c < C; ++c) logits[(0 * C + c) * L + 0] = 1000.0 * (c - 1.5);          // needs the max shift
  const std::vector<int64_t> targets = {0, 3, 1, 2, -100, 1, 0, 3, 3, 2, 1, -100, 0, 0, 2};  // [N, L]
  const std::vector<double> class_weight = {0.5, 1.0, 2.0, 1.5};
  for (bool weighted : {false, true}) {
    for (double smoothing : {0.0, 0.2}) {
      for (Reduction reduction : kReductions) {
        INFO("weighted " << weighted << ", label_smoothing " << smoothing << ", reduction " << int(reduction));
        std::vector<double> losses;
        double weight_sum = 0;
        for (int64_t n = 0; n < N; ++n) {
          for (int64_t l = 0; l < L; ++l) {
            const int64_t y = targets[n * L + l];
            if (y == -100) {
              losses.push_back(0.0);
              continue;
            }
            std::vector<double> logp = log_softmax_at(logits, C, L, n, l);
            auto w = [&](int64_t c) { return weighted ? class_weight[c] : 1.0; };
            double smooth = 0;
            for (int64_t c = 0; c < C; ++c) smooth -= w(c) * logp[c];
            losses.push_back((1 - smoothing) * -w(y) * logp[y] + smoothing / C * smooth);
            weight_sum += w(y);
          }
        }
        nn::CrossEntropyLossOptions options;
        options.reduction(reduction).label_smoothing(smoothing);
        if (weighted) options.weight(tensor(class_weight));
        nn::CrossEntropyLoss loss(options);
        Tensor out = loss(tensor(logits, {N, C, L}), tensor(targets, {N, L}));
        if (reduction == Reduction::None) CHECK(out.sizes() == Shape{N, L});
        require_close(out, reduce(losses, weight_sum, reduction));
      }
    }
  }
}

TEST_CASE("CrossEntropyLoss on [N, C] float32 logits", "[nn][loss]") {
  const int64_t N = 6, C = 3;
  std::vector<double> logits = draw(N * C, -2, 2, 2);
  const std::vector<int64_t> targets = {2, 0, 1, 1, 2, 0};
  double total = 0;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> logp = log_softmax_at(logits, C, 1, n, 0);
    double smooth = 0;
    for (double v : logp) smooth -= v;
    total += 0.9 * -logp[targets[n]] + 0.1 / C * smooth;
  }
  nn::CrossEntropyLoss loss(nn::CrossEntropyLossOptions().label_smoothing(0.1));
  Tensor out = loss(tensor(logits, {N, C}).to(kFloat32), tensor(targets));
  CHECK(out.dtype() == kFloat32);
  CHECK(out.item<double>() == Approx(total / N).epsilon(1e-6));
}

TEST_CASE("NLLLoss with class weights and ignore_index", "[nn][loss]") {
  const int64_t N = 6, C = 4;
  std::vector<double> input = draw(N * C, -4, 0, 3);
  const std::vector<int64_t> targets = {3, 0, 2, 1, 1, 2};
  const std::vector<double> class_weight = {1.0, 0.25, 3.0, 0.5};
  for (Reduction reduction : kReductions) {
    INFO("reduction " << int(reduction));
    std::vector<double> losses;
    double weight_sum = 0;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t y = targets[n];
      if (y == 1) {  // ignore_index = 1
        losses.push_back(0.0);
        continue;
      }
      losses.push_back(-class_weight[y] * input[n * C + y]);
      weight_sum += class_weight[y];
    }
    nn::NLLLoss loss(nn::NLLLossOptions().weight(tensor(class_weight)).ignore_index(1).reduction(reduction));
    require_close(loss(tensor(input, {N, C}), tensor(targets)), reduce(losses, weight_sum, reduction));
  }
}

TEST_CASE("MSELoss", "[nn][loss]") {
  std::vector<double> input = draw(12, -2, 2, 4), target = draw(12, -2, 2, 5);
  std::vector<double> losses;
  for (size_t i = 0; i < input.size(); ++i) losses.push_back((input[i] - target[i]) * (input[i] - target[i]));
  for (Reduction reduction : kReductions) {
    INFO("reduction " << int(reduction));
    nn::MSELoss loss(reduction);
    Tensor out = loss(tensor(input, {3, 4}), tensor(target, {3, 4}));
    require_close(out, reduce(losses, static_cast<double>(losses.size()), reduction));
  }
}

TEST_CASE("BCEWithLogitsLoss with weight and pos_weight", "[nn][loss]") {
  const int64_t N = 4, C = 3;
  std::vector<double> logits = draw(N * C, -4, 4, 6), target = draw(N * C, 0, 1, 7);
  logits[0] = 60.0;  // log(1 - sigmoid(60)) underflows unless computed stably
  logits[1] = -60.0;
  const std::vector<double> weight = {0.5, 1.0, 2.0}, pos_weight = {3.0, 1.0, 0.5};  // per class: broadcast
  for (bool weighted : {false, true}) {
    for (Reduction reduction : kReductions) {
      INFO("weighted " << weighted << ", reduction " << int(reduction));
      std::vector<double> losses;
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t c = 0; c < C; ++c) {
          const double x = logits[n * C + c], y = target[n * C + c];
          const double log_sigmoid = -std::log1p(std::exp(-std::abs(x))) + std::min(x, 0.0);
          const double log_one_minus = log_sigmoid - x;  // log(1 - sigmoid(x)) = log sigmoid(x) - x
          const double p = weighted ? pos_weight[c] : 1.0, w = weighted ? weight[c] : 1.0;
          losses.push_back(-w * (p * y * log_sigmoid + (1 - y) * log_one_minus));
        }
      }
      nn::BCEWithLogitsLossOptions options;
      options.reduction(reduction);
      if (weighted) options.weight(tensor(weight)).pos_weight(tensor(pos_weight));
      nn::BCEWithLogitsLoss loss(options);
      require_close(loss(tensor(logits, {N, C}), tensor(target, {N, C})),
                    reduce(losses, static_cast<double>(losses.size()), reduction));
    }
  }
}

TEST_CASE("gradcheck through the loss modules", "[nn][loss][gradcheck]") {
  const Tensor classes = tensor<int64_t>({2, 0, 1, 2});
  nn::CrossEntropyLoss cross_entropy(
      nn::CrossEntropyLossOptions().weight(tensor<double>({1.0, 2.0, 0.5})).label_smoothing(0.3));
  nn::BCEWithLogitsLoss bce(nn::BCEWithLogitsLossOptions().pos_weight(tensor<double>({2.0, 0.5, 1.0})));
  nn::MSELoss mse(Reduction::Sum);
  nn::NLLLoss nll;
  const std::vector<GradCase> cases = {
      {.name = "loss.cross_entropy",
       .fn = [=](const Inputs& x) { return cross_entropy(x[0], classes); },
       .inputs = {{.shape = {4, 3}}}},
      {.name = "loss.bce_with_logits",
       .fn = [=](const Inputs& x) { return bce(x[0], x[1]); },
       .inputs = {{.shape = {4, 3}}, {.shape = {4, 3}, .low = 0.0, .high = 1.0}}},
      {.name = "loss.mse",
       .fn = [=](const Inputs& x) { return mse(x[0], x[1]); },
       .inputs = {{.shape = {2, 3}}, {.shape = {2, 3}}}},
      {.name = "loss.nll", .fn = [=](const Inputs& x) { return nll(x[0], classes); }, .inputs = {{.shape = {4, 3}}}},
  };
  for (const GradCase& c : cases) {
    GradCheckResult result = gradcheck(c, Device(kCPU));
    INFO(result.message);
    CHECK(result.ok);
  }
}
