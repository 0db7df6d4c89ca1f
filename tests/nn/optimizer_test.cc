// SGD, Adam and AdamW end to end: convergence on least squares, per-group hyper-parameters, skipped
// parameters, zero_grad, strided parameters, and the option and parameter checks.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/ember_core.h"
#include "nn/optim/adam.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"

using namespace ember;
using namespace ember::optim;

namespace {

// min_w mean((A w - b)^2) with an exact solution x_true.
struct LeastSquares {
  Tensor A, b, x_true;
  LeastSquares() {
    Generator gen(7);
    A = randn({32, 4}, {}, &gen);
    x_true = tensor<float>({1.0f, -2.0f, 0.5f, 3.0f});
    b = A.matmul(x_true);
  }
  Tensor loss(const Tensor& w) const { return (A.matmul(w) - b).square().mean(); }
};

double train(Optimizer& optimizer, const Tensor& w, const LeastSquares& problem, int steps) {
  for (int i = 0; i < steps; ++i) {
    optimizer.zero_grad();
    problem.loss(w).backward();
    optimizer.step();
  }
  return (w.detach() - problem.x_true).abs().max().item<double>();
}

Tensor leaf(const Tensor& values) { return values.clone().requires_grad_(); }

}  // namespace

TEST_CASE("each optimizer solves a least-squares problem", "[optim]") {
  LeastSquares problem;
  Tensor w = leaf(zeros({4}));
  SECTION("SGD with Nesterov momentum") {
    SGD sgd({w}, SGDOptions(0.05).momentum(0.9).nesterov(true));
    REQUIRE(train(sgd, w, problem, 300) < 1e-4);
  }
  SECTION("SGD, plain") {
    SGD sgd({w}, SGDOptions(0.1));
    REQUIRE(train(sgd, w, problem, 500) < 1e-4);
  }
  SECTION("Adam") {
    Adam adam({w}, AdamOptions(0.05));
    REQUIRE(train(adam, w, problem, 1000) < 1e-3);
  }
  SECTION("Adam with AMSGrad") {
    Adam adam({w}, AdamOptions(0.05).amsgrad(true));
    REQUIRE(train(adam, w, problem, 1000) < 1e-3);
  }
  SECTION("AdamW") {
    AdamW adamw({w}, AdamWOptions(0.05).weight_decay(1e-3));
    REQUIRE(train(adamw, w, problem, 1000) < 1e-2);
  }
}

TEST_CASE("defaults follow PyTorch", "[optim]") {
  AdamOptions adam;
  REQUIRE(adam.lr() == 1e-3);
  REQUIRE(adam.betas() == Betas{0.9, 0.999});
  REQUIRE(adam.eps() == 1e-8);
  REQUIRE(adam.weight_decay() == 0.0);
  REQUIRE_FALSE(adam.amsgrad());
  AdamWOptions adamw;
  REQUIRE(adamw.lr() == 1e-3);
  REQUIRE(adamw.weight_decay() == 1e-2);
  SGDOptions sgd(0.1);
  REQUIRE(sgd.momentum() == 0.0);
  REQUIRE(sgd.dampening() == 0.0);
  REQUIRE_FALSE(sgd.nesterov());
}

TEST_CASE("parameter groups apply their own lr and weight decay", "[optim]") {
  Tensor decayed = leaf(ones({3})), plain = leaf(ones({3}));
  SGD sgd({ParamGroup({decayed}, SGDOptions(0.1).weight_decay(0.1)), ParamGroup({plain})}, SGDOptions(0.01));
  REQUIRE(sgd.param_groups().size() == 2);
  REQUIRE(static_cast<const SGDOptions&>(sgd.param_groups()[1].options()).lr() == 0.01);  // took the defaults
  decayed.set_grad(full({3}, 0.5));
  plain.set_grad(full({3}, 0.5));
  sgd.step();
  // 1 - lr * (grad + weight_decay * param), each rounded in float32 as the kernel does.
  const float expect_decayed = 1.0f + float(-0.1) * (0.5f + float(0.1) * 1.0f);
  const float expect_plain = 1.0f + float(-0.01) * 0.5f;
  REQUIRE(decayed.detach().to_vector<float>() == std::vector<float>(3, expect_decayed));
  REQUIRE(plain.detach().to_vector<float>() == std::vector<float>(3, expect_plain));

  // Changing a group's lr (what schedulers do) takes effect on the next step.
  sgd.param_groups()[1].options().set_lr(1.0);
  sgd.step();
  REQUIRE(plain.detach().to_vector<float>() == std::vector<float>(3, expect_plain + float(-1.0) * 0.5f));
}

TEST_CASE("AdamW decays weights but not the group without weight decay", "[optim]") {
  Tensor weight = leaf(full({4}, 2.0)), bias = leaf(full({4}, 2.0));
  AdamW adamw({ParamGroup({weight}), ParamGroup({bias}, AdamWOptions(0.1).weight_decay(0.0))},
              AdamWOptions(0.1).weight_decay(0.5));
  weight.set_grad(zeros({4}));
  bias.set_grad(zeros({4}));
  adamw.step();
  // With zero grads the moments stay 0, so only the decoupled decay moves the weight.
  REQUIRE(weight.detach().to_vector<float>() == std::vector<float>(4, 2.0f * float(1.0 - 0.1 * 0.5)));
  REQUIRE(bias.detach().to_vector<float>() == std::vector<float>(4, 2.0f));

  // Adam's L2 decay instead feeds weight_decay * param into the gradient: a full lr-sized step.
  Tensor w = leaf(full({4}, 2.0));
  Adam adam({w}, AdamOptions(0.1).weight_decay(0.5));
  w.set_grad(zeros({4}));
  adam.step();
  REQUIRE(w.detach().to_vector<float>()[0] == Approx(1.9).epsilon(1e-6));
}

TEST_CASE("parameters without a grad are skipped and keep no state", "[optim]") {
  Tensor a = leaf(ones({2})), b = leaf(ones({2}));
  SECTION("SGD") {
    SGD sgd({a, b}, SGDOptions(0.1).momentum(0.9));
    a.set_grad(ones({2}));
    sgd.step();
    REQUIRE(b.detach().to_vector<float>() == std::vector<float>{1.0f, 1.0f});
    REQUIRE(sgd.find_state(b) == nullptr);
    REQUIRE(sgd.find_state(a)->tensors.count("momentum_buffer") == 1);
  }
  SECTION("Adam counts steps per parameter") {
    Adam adam({a, b}, AdamOptions(0.1));
    a.set_grad(ones({2}));
    adam.step();
    b.set_grad(ones({2}));
    adam.step();
    REQUIRE(adam.find_state(a)->step == 2);
    REQUIRE(adam.find_state(b)->step == 1);
    // A first Adam step moves each element by lr (bias correction makes m / sqrt(v) = 1).
    REQUIRE(b.detach().to_vector<float>()[0] == Approx(0.9).epsilon(1e-6));
  }
  SECTION("SGD without momentum keeps no buffer") {
    SGD sgd({a}, SGDOptions(0.1));
    a.set_grad(ones({2}));
    sgd.step();
    REQUIRE(sgd.find_state(a)->tensors.empty());
  }
}

TEST_CASE("zero_grad drops or zeroes the grads", "[optim]") {
  Tensor a = leaf(ones({3})), b = leaf(ones({3}));
  SGD sgd({a, b}, SGDOptions(0.1));
  a.set_grad(full({3}, 2.0));
  SECTION("set_to_none (the default)") {
    sgd.zero_grad();
    REQUIRE_FALSE(a.grad().defined());
    REQUIRE_FALSE(b.grad().defined());
  }
  SECTION("in place") {
    void* storage = a.grad().data_ptr();
    sgd.zero_grad(/*set_to_none=*/false);
    REQUIRE(a.grad().data_ptr() == storage);
    REQUIRE(a.grad().to_vector<float>() == std::vector<float>(3, 0.0f));
    REQUIRE_FALSE(b.grad().defined());
  }
}

TEST_CASE("a strided parameter is updated like its contiguous twin", "[optim]") {
  Tensor base = randn({3, 4});
  Tensor strided = base.clone().t().requires_grad_();  // a [4, 3] leaf with transposed strides
  Tensor dense = base.clone().t().contiguous().requires_grad_();
  REQUIRE_FALSE(strided.is_contiguous());
  Tensor grad = randn({4, 3});
  AdamW adamw({strided, dense}, AdamWOptions(0.1));
  for (int i = 0; i < 3; ++i) {
    strided.set_grad(grad.t().contiguous().t());  // a strided grad too
    dense.set_grad(grad);
    adamw.step();
  }
  REQUIRE(strided.detach().contiguous().to_vector<float>() == dense.detach().to_vector<float>());
  REQUIRE_FALSE(strided.is_contiguous());  // updated in place, layout kept
}

TEST_CASE("invalid options are rejected, naming the option", "[optim]") {
  Tensor w = leaf(zeros({2}));
  REQUIRE_THROWS_WITH(SGD({w}, SGDOptions(-0.1)), Catch::Contains("SGD: invalid lr"));
  REQUIRE_THROWS_WITH(SGD({w}, SGDOptions(0.1).momentum(-0.5)), Catch::Contains("invalid momentum"));
  REQUIRE_THROWS_WITH(SGD({w}, SGDOptions(0.1).weight_decay(-1)), Catch::Contains("invalid weight_decay"));
  REQUIRE_THROWS_WITH(SGD({w}, SGDOptions(0.1).nesterov(true)), Catch::Contains("nesterov requires momentum > 0"));
  REQUIRE_THROWS_WITH(SGD({w}, SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)),
                      Catch::Contains("dampening == 0"));
  REQUIRE_THROWS_WITH(SGD({w}, SGDOptions(std::nan(""))), Catch::Contains("invalid lr"));
  REQUIRE_THROWS_WITH(Adam({w}, AdamOptions(-1)), Catch::Contains("Adam: invalid lr"));
  REQUIRE_THROWS_WITH(Adam({w}, AdamOptions().betas({1.0, 0.999})), Catch::Contains("invalid beta1"));
  REQUIRE_THROWS_WITH(Adam({w}, AdamOptions().betas({0.9, -0.1})), Catch::Contains("invalid beta2"));
  REQUIRE_THROWS_WITH(Adam({w}, AdamOptions().eps(-1e-8)), Catch::Contains("invalid eps"));
  REQUIRE_THROWS_WITH(AdamW({w}, AdamWOptions().weight_decay(-0.01)), Catch::Contains("AdamW: invalid weight_decay"));
  // A group's own options are checked too.
  REQUIRE_THROWS_WITH(SGD({ParamGroup({w}, SGDOptions(0.1).momentum(-1))}, SGDOptions(0.1)),
                      Catch::Contains("invalid momentum"));
}

TEST_CASE("invalid parameters and groups are rejected", "[optim]") {
  Tensor w = leaf(zeros({2})), v = leaf(zeros({2}));
  REQUIRE_THROWS_WITH(SGD(std::vector<Tensor>{}, SGDOptions(0.1)), Catch::Contains("empty parameter list"));
  REQUIRE_THROWS_WITH(SGD({w, w}, SGDOptions(0.1)), Catch::Contains("appears more than once"));
  REQUIRE_THROWS_WITH(SGD({w * 2.0}, SGDOptions(0.1)), Catch::Contains("non-leaf"));
  REQUIRE_THROWS_WITH(SGD({zeros({2}, kInt64)}, SGDOptions(0.1)), Catch::Contains("floating-point"));
  REQUIRE_THROWS_WITH(SGD({ParamGroup({w}, AdamOptions())}, SGDOptions(0.1)),
                      Catch::Contains("has AdamOptions, expected SGDOptions"));

  SGD sgd({w}, SGDOptions(0.1));
  REQUIRE_THROWS_WITH(sgd.add_param_group(ParamGroup({w})), Catch::Contains("appears more than once"));
  sgd.add_param_group(ParamGroup({v}, SGDOptions(0.5)));
  REQUIRE(sgd.param_groups().size() == 2);
  REQUIRE(sgd.parameters().size() == 2);
  REQUIRE(sgd.param_groups()[1].options().get_lr() == 0.5);
}
