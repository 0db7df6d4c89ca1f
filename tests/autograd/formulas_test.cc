// Gradients that finite differences cannot check, against values written out by hand: prod with
// exact zeros, PyTorch's conventions at kinks and ties (checked against torch 1.13), and casts
// whose gradient must come back in the input's dtype.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "tests/autograd/test_util.h"

namespace ember::testing {
namespace {

using V = std::vector<double>;

// d(sum of f(x...))/dx for each input.
template <typename F>
std::vector<V> grads_of(F f, std::vector<Tensor> inputs) {
  for (Tensor& x : inputs) x.requires_grad_(true);
  f(inputs).sum().backward();
  std::vector<V> out;
  for (const Tensor& x : inputs) out.push_back(x.grad().defined() ? values(x.grad()) : V());
  return out;
}

template <typename F>
V grad_of(F f, std::initializer_list<double> x) {
  return grads_of([&](const std::vector<Tensor>& in) { return f(in[0]); }, {f64(x)})[0];
}

TEST_CASE("formulas: prod with exact zeros", "[formulas]") {
  auto prod = [](const Tensor& x) { return x.prod(); };
  CHECK(grad_of(prod, {2, 5, 3}) == V{15, 6, 10});
  CHECK(grad_of(prod, {2, 0, 3}) == V{0, 6, 0});  // only the zero sees the others' product
  CHECK(grad_of(prod, {0, -4, 0}) == V{0, 0, 0});
  // Along a dim: rows with no, one and two zeros.
  auto rows = [](const Tensor& x) { return x.view({3, 3}).prod({1}); };
  CHECK(grad_of(rows, {2, 3, 4, 0, 3, -2, 0, 5, 0}) == V{12, 8, 6, -6, 0, 0, 0, 0, 0});
}

TEST_CASE("formulas: kinks take PyTorch's one-sided values", "[formulas]") {
  CHECK(grad_of([](const Tensor& x) { return x.abs(); }, {0, -2}) == V{0, -1});
  CHECK(grad_of([](const Tensor& x) { return x.relu(); }, {0, 2}) == V{0, 1});
  CHECK(grad_of([](const Tensor& x) { return x.leaky_relu(0.125); }, {0, -1}) == V{0.125, 0.125});
  CHECK(grad_of([](const Tensor& x) { return x.sign() + x.floor() + x.ceil() + x.round(); }, {0, 0.5, 1.5}) ==
        V{0, 0, 0});
  // The bounds themselves pass the gradient.
  CHECK(grad_of([](const Tensor& x) { return x.clamp(-1.0, 1.0); }, {-1, 1, 2, -3}) == V{1, 1, 0, 0});
  CHECK(grad_of([](const Tensor& x) { return x.norm(2.0); }, {0, 0}) == V{0, 0});
  CHECK(grad_of([](const Tensor& x) { return x.norm(1.0); }, {0, -2}) == V{0, -1});
  CHECK(grad_of([](const Tensor& x) { return x.pow(0.0); }, {0, 2}) == V{0, 0});
  // 0^b: no gradient to the base where b = 0, none to the exponent where the base is 0.
  std::vector<V> g =
      grads_of([](const std::vector<Tensor>& in) { return in[0].pow(in[1]); }, {f64({0, 0, 2}), f64({0, 2, 0})});
  CHECK(g[0] == V{0, 0, 0});
  CHECK(g[1] == V{0, 0, std::log(2.0)});
}

TEST_CASE("formulas: ties", "[formulas]") {
  // Reductions to one value share the gradient among the tied elements...
  CHECK(grad_of([](const Tensor& x) { return x.amax(); }, {1, 3, 3}) == V{0, 0.5, 0.5});
  CHECK(grad_of([](const Tensor& x) { return x.min(); }, {1, 1, 1, 3}) == V{1.0 / 3, 1.0 / 3, 1.0 / 3, 0});
  CHECK(grad_of([](const Tensor& x) { return x.norm(std::numeric_limits<double>::infinity()); }, {-2, 2, 1}) ==
        V{-0.5, 0.5, 0});
  // ...max/min along a dim send it to the index they return (the first).
  CHECK(grad_of([](const Tensor& x) { return x.max(0).first; }, {1, 3, 3}) == V{0, 1, 0});
  CHECK(grad_of([](const Tensor& x) { return x.min(0).first; }, {1, 1, 3}) == V{1, 0, 0});
  std::vector<V> g =
      grads_of([](const std::vector<Tensor>& in) { return in[0].minimum(in[1]); }, {f64({1, 2}), f64({1, 3})});
  CHECK(g[0] == V{0.5, 1});
  CHECK(g[1] == V{0.5, 0});
}

TEST_CASE("formulas: std of a constant slice has zero gradient, not NaN", "[formulas]") {
  // PyTorch masks d std / d var = 1 / (2 std) where std is 0; 0 * inf would be NaN.
  Tensor x = f64({2, 2, 1, 3}, {2, 2}).requires_grad_();
  Tensor s = x.std({1});
  s.sum().backward();
  CHECK(values(s) == V{0, std::sqrt(2.0)});
  CHECK(values(x.grad()) == V{0, 0, -1 / std::sqrt(2.0), 1 / std::sqrt(2.0)});
}

TEST_CASE("formulas: logsumexp with -inf entries", "[formulas]") {
  CHECK(grad_of([](const Tensor& x) { return x.logsumexp({0}); }, {-std::numeric_limits<double>::infinity(), 0}) ==
        V{0, 1});
}

TEST_CASE("formulas: a cast's gradient returns in the input's dtype", "[formulas]") {
  SECTION("float32 leaf computed on in float64") {
    Tensor x = tensor(std::vector<float>{1.5f, -2.0f}).requires_grad_();
    (x.to(kFloat64) * f64({3.0, 0.25})).sum().backward();
    REQUIRE(x.grad().dtype() == kFloat32);
    CHECK(x.grad().to_vector<float>() == std::vector<float>{3.0f, 0.25f});
  }
  SECTION("float64 leaf through float32: the gradient is the float32 one, widened") {
    Tensor x = f64({0.1, 0.2}).requires_grad_();
    Tensor y = x.to(kFloat32);
    y.backward(full({2}, 1.0 / 3, kFloat32));
    REQUIRE(x.grad().dtype() == kFloat64);
    const double third = static_cast<float>(1.0 / 3);
    CHECK(values(x.grad()) == V{third, third});
  }
}

TEST_CASE("formulas: alpha scales in the promoted dtype", "[formulas]") {
  // float32(1/3) * 3 is not 1 in float64; rounding the product to float32 first would make it 1.
  const float third = 1.0f / 3;
  Tensor b = tensor(std::vector<float>{third});
  CHECK(values(zeros({1}, kFloat64).add(b, 3)) == V{3.0 * third});
  CHECK(values(zeros({1}, kFloat64).sub(b, -3)) == V{3.0 * third});
  Tensor acc = zeros({1}, kFloat64);
  acc.add_(b, 3);
  CHECK(values(acc) == V{3.0 * third});
}

}  // namespace
}  // namespace ember::testing
