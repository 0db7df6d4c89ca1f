// In-place ops and autograd: the version counter turns a change to a saved tensor into an error
// naming the node, changes to tensors no node saved stay legal, and the rules on leaves and views.
#include <catch2/catch.hpp>

#include <cmath>

#include "tests/autograd/test_util.h"

namespace ember::testing {
namespace {

using Catch::Matchers::Contains;
using V = std::vector<double>;

TEST_CASE("inplace: changing a saved tensor raises at backward, naming the node", "[inplace]") {
  Tensor x = leaf({1.0, 2.0}), w = leaf({3.0, 4.0});

  SECTION("a non-leaf saved by mul, rebased by add_") {
    Tensor y = x * 2.0;
    Tensor z = y * w;  // saves y for w's gradient
    y.add_(f64({1.0}));
    std::string message = error_of([&] { z.sum().backward(); });
    CHECK_THAT(message, Contains("MulBackward0"));
    CHECK_THAT(message, Contains("modified by an inplace operation"));
  }
  SECTION("a constant saved by mul, changed directly") {
    Tensor c = f64({5.0, 6.0});
    Tensor z = x * c;
    c.mul_(f64({2.0}));
    CHECK_THAT(error_of([&] { z.sum().backward(); }), Contains("MulBackward0"));
  }
  SECTION("an op's own output that its formula reads") {
    Tensor y = x.exp();
    y.add_(f64({1.0}));
    std::string message = error_of([&] { y.sum().backward(); });
    CHECK_THAT(message, Contains("ExpBackward0"));
    CHECK_THAT(message, Contains("modified by an inplace operation"));
  }
  SECTION("through a tensor sharing the memory: a detached alias or a view") {
    for (bool use_view : {false, true}) {
      Tensor c = f64({5.0, 6.0});
      Tensor z = x * c;
      Tensor alias = use_view ? c.view({2, 1}) : c.detach();
      alias.zero_();
      CHECK_THAT(error_of([&] { z.sum().backward(); }), Contains("modified by an inplace operation"));
    }
  }
  SECTION("a parameter update under NoGradGuard before backward") {
    Tensor z = (x * w).sum();
    {
      NoGradGuard no_grad;
      w.sub_(f64({0.1}));
    }
    CHECK_THAT(error_of([&] { z.backward(); }), Contains("MulBackward0"));
  }
}

TEST_CASE("inplace: changing tensors no node saved stays legal", "[inplace]") {
  Tensor x = leaf({1.0, 2.0});

  SECTION("operands of add") {
    Tensor c = f64({5.0, 6.0});
    Tensor z = x + c;
    c.zero_();
    z.sum().backward();
    CHECK(values(x.grad()) == V{1, 1});
  }
  SECTION("the input of an op whose formula reads only its output") {
    Tensor h = x * 1.0;
    Tensor y = h.sigmoid();
    h.add_(f64({10.0}));
    y.sum().backward();
    std::vector<double> s = values(y);
    CHECK(values(x.grad()) == V{s[0] * (1 - s[0]), s[1] * (1 - s[1])});
  }
  SECTION("an activation's output, then a residual add") {
    Tensor y = x.sin();
    y += x;
    y.sum().backward();
    CHECK_THAT(values(x.grad()), Catch::Matchers::Approx(V{std::cos(1.0) + 1, std::cos(2.0) + 1}));
  }
  SECTION("the operand of mul whose partner needs no gradient") {
    Tensor h = x * 2.0;
    Tensor z = h * f64({3.0, 4.0});  // h's gradient needs the constant only
    h.add_(f64({1.0}));
    z.sum().backward();
    CHECK(values(x.grad()) == V{6, 8});
  }
}

TEST_CASE("inplace: rules on leaves and views", "[inplace]") {
  Tensor x = leaf({1.0, 2.0});
  CHECK_THAT(error_of([&] { x.add_(f64({1.0})); }), Contains("a leaf Variable that requires grad"));
  CHECK_THAT(error_of([&] { x.view({2, 1}).mul_(f64({2.0})); }), Contains("view"));
  {
    NoGradGuard no_grad;  // how an optimizer updates a parameter
    const uint32_t before = x.version();
    x.add_(f64({1.0}));
    CHECK(x.version() == before + 1);
  }
  CHECK(values(x) == V{2, 3});
  CHECK(x.is_leaf());
  CHECK(x.requires_grad());

  // A view whose base is still alive would keep a stale history: refused.
  Tensor y = x * 2.0;
  Tensor view = y.unsqueeze(0);
  CHECK_THAT(error_of([&] { view.add_(f64({1.0})); }), Contains("in-place operation on a view"));
}

TEST_CASE("inplace: a rebased tensor carries the new history", "[inplace]") {
  Tensor x = leaf({1.0, 2.0}), w = leaf({3.0, -1.0});
  Tensor y = x * 2.0;
  auto* before = y.grad_fn().get();
  y.mul_(w);
  CHECK(y.grad_fn().get() != before);
  CHECK_FALSE(y.is_leaf());
  y.sum().backward();
  CHECK(values(x.grad()) == V{6, -2});
  CHECK(values(w.grad()) == V{2, 4});

  SECTION("a constant tensor joins the graph when an operand needs gradient") {
    Tensor acc = zeros({2}, kFloat64);
    acc.add_(x);
    CHECK(acc.requires_grad());
    CHECK_FALSE(acc.is_leaf());
  }
}

}  // namespace
}  // namespace ember::testing
