// clip_grad_norm_ and clip_grad_value_: the total norm over all grads (2, 1 and inf norms), the
// scaling PyTorch applies (max_norm / (norm + 1e-6), never above 1), and the non-finite check.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/ember_core.h"
#include "nn/optim/clip_grad.h"

using namespace ember;
using namespace ember::optim;

namespace {

// Grads [3, 4] and [-12]: 2-norm 13, 1-norm 19, inf-norm 12. The third parameter has no grad.
std::vector<Tensor> params_with_grads(DType dtype = kFloat32) {
  std::vector<Tensor> params = {zeros({2}, dtype).requires_grad_(), zeros({1}, dtype).requires_grad_(),
                                zeros({5}, dtype).requires_grad_()};
  params[0].set_grad(tensor<double>({3.0, 4.0}).to(dtype));
  params[1].set_grad(tensor<double>({-12.0}).to(dtype));
  return params;
}

}  // namespace

TEST_CASE("clip_grad_norm_ returns the total norm and scales the grads to max_norm", "[optim][clip]") {
  auto params = params_with_grads();
  const double norm = clip_grad_norm_(params, 6.5);
  REQUIRE(norm == Approx(13.0).epsilon(1e-7));
  const float coef = 6.5f / (13.0f + 1e-6f);
  REQUIRE(params[0].grad().to_vector<float>() == std::vector<float>{3.0f * coef, 4.0f * coef});
  REQUIRE(params[1].grad().to_vector<float>() == std::vector<float>{-12.0f * coef});
  REQUIRE_FALSE(params[2].grad().defined());
  // Now within a larger limit: a second call leaves them alone.
  std::vector<float> before = params[0].grad().to_vector<float>();
  REQUIRE(clip_grad_norm_(params, 7.0) == Approx(6.5).epsilon(1e-6));
  REQUIRE(params[0].grad().to_vector<float>() == before);
}

TEST_CASE("clip_grad_norm_ never scales grads up", "[optim][clip]") {
  auto params = params_with_grads(kFloat64);
  REQUIRE(clip_grad_norm_(params, 100.0) == Approx(13.0));
  REQUIRE(params[0].grad().to_vector<double>() == std::vector<double>{3.0, 4.0});
}

TEST_CASE("clip_grad_norm_ with other norm types", "[optim][clip]") {
  SECTION("inf: the largest magnitude") {
    auto params = params_with_grads();
    REQUIRE(clip_grad_norm_(params, 6.0, std::numeric_limits<double>::infinity()) == 12.0);
    REQUIRE(params[1].grad().to_vector<float>()[0] == Approx(-6.0).epsilon(1e-6));
  }
  SECTION("1-norm") {
    auto params = params_with_grads();
    REQUIRE(clip_grad_norm_(params, 100.0, 1.0) == Approx(19.0));
  }
  SECTION("no grads at all") {
    std::vector<Tensor> params = {zeros({3}).requires_grad_()};
    REQUIRE(clip_grad_norm_(params, 1.0) == 0.0);
  }
  SECTION("float32 and float64 grads together") {
    auto params = params_with_grads();
    Tensor extra = zeros({1}, kFloat64).requires_grad_();
    extra.set_grad(tensor<double>({84.0}));
    params.push_back(extra);
    REQUIRE(clip_grad_norm_(params, 1000.0) == Approx(85.0));  // sqrt(13^2 + 84^2)
  }
}

TEST_CASE("clip_grad_norm_ on a non-finite norm", "[optim][clip]") {
  auto params = params_with_grads();
  params[1].set_grad(tensor<float>({std::numeric_limits<float>::infinity()}));
  REQUIRE_THROWS_WITH(clip_grad_norm_(params, 1.0, 2.0, /*error_if_nonfinite=*/true), Catch::Contains("non-finite"));
  REQUIRE(params[0].grad().to_vector<float>() == std::vector<float>{3.0f, 4.0f});  // untouched by the failed call
  REQUIRE(std::isinf(clip_grad_norm_(params, 1.0)));
}

TEST_CASE("clip_grad_value_ clamps every element", "[optim][clip]") {
  auto params = params_with_grads();
  clip_grad_value_(params, 3.5);
  REQUIRE(params[0].grad().to_vector<float>() == std::vector<float>{3.0f, 3.5f});
  REQUIRE(params[1].grad().to_vector<float>() == std::vector<float>{-3.5f});
  REQUIRE_THROWS_WITH(clip_grad_value_(params, -1.0), Catch::Contains("clip_value >= 0"));
}
