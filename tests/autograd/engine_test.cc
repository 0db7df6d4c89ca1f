// The backward engine's contract: diamonds, accumulation, retain_graph, explicit and implicit
// root gradients, grad mode (thread-local), detach, requires_grad rules, retain_grad, and
// autograd::grad. Values are chosen so the expected gradients are exact in float64.
#include <catch2/catch.hpp>

#include <latch>
#include <thread>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "tests/autograd/test_util.h"

namespace ember::testing {
namespace {

using Catch::Matchers::Contains;
using V = std::vector<double>;

TEST_CASE("engine: a tensor used twice gets the sum of both paths", "[engine]") {
  Tensor x = leaf({0.5, -1.0, 2.0});
  Tensor a = x * x;      // da/dx = 2x
  Tensor y = a * a + a;  // dy/da = 2a + 1
  y.sum().backward();
  V expected;
  for (double v : {0.5, -1.0, 2.0}) expected.push_back((2 * v * v + 1) * 2 * v);
  CHECK(values(x.grad()) == expected);
}

TEST_CASE("engine: two roots sharing a subgraph in one backward call", "[engine]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor shared = x * 3.0;
  Tensor y1 = shared.sum(), y2 = (shared * x).sum();  // d/dx: 3 and 6x
  autograd::backward({y1, y2});
  CHECK(values(x.grad()) == V{3 + 6 * 1.0, 3 + 6 * 2.0});
}

TEST_CASE("engine: gradients accumulate across backward calls", "[engine]") {
  Tensor x = leaf({1.0, -2.0});
  (x * 4.0).sum().backward();
  (x * x).sum().backward();
  CHECK(values(x.grad()) == V{4 + 2 * 1.0, 4 + 2 * -2.0});

  SECTION("zeroing .grad starts over") {
    x.mutable_grad().zero_();
    (x * 2.0).sum().backward();
    CHECK(values(x.grad()) == V{2, 2});
  }
  SECTION("a .grad held by the caller is the one updated") {
    Tensor held = x.grad();
    (x * 1.0).sum().backward();
    CHECK(values(held) == V{7, 1});
  }
}

TEST_CASE("engine: retain_graph allows a second backward; without it the graph is freed", "[engine]") {
  Tensor x = leaf({1.5, -0.5});
  Tensor y = (x * x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward(Tensor(), /*retain_graph=*/true);
  CHECK(values(x.grad()) == V{2 * 2 * 1.5, 2 * 2 * -0.5});
  y.backward();  // frees the graph
  CHECK(values(x.grad()) == V{3 * 2 * 1.5, 3 * 2 * -0.5});
  std::string message = error_of([&] { y.backward(); });
  CHECK_THAT(message, Contains("backward through the graph a second time"));
  CHECK_THAT(message, Contains("retain_graph"));
  CHECK(values(x.grad()) == V{9, -3});  // the failed call added nothing
}

TEST_CASE("engine: a backward refused for a freed graph runs no hook and retains nothing", "[engine]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = (x * 2.0).sum();
  int hook_calls = 0;
  y.register_hook([&](const Tensor&) {
    ++hook_calls;
    return Tensor();
  });
  y.retain_grad();
  y.backward();
  CHECK_THAT(error_of([&] { y.backward(); }), Contains("backward through the graph a second time"));
  CHECK(hook_calls == 1);
  CHECK(values(y.grad()) == V{1});
}

TEST_CASE("engine: a graph freed by one root cannot be reused from another", "[engine]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor h = x * x;
  h.sum().backward();
  CHECK_THAT(error_of([&] { (h * 2.0).sum().backward(); }), Contains("backward through the graph a second time"));
}

TEST_CASE("engine: non-scalar outputs take an explicit gradient", "[engine]") {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = x * 3.0;
  y.backward(f64({1, 0, -1, 2, 0.5, 0}, {2, 3}));
  CHECK(values(x.grad()) == V{3, 0, -3, 6, 1.5, 0});
  CHECK(x.grad().sizes() == Shape{2, 3});

  CHECK_THAT(error_of([&] { (x * 2.0).backward(); }),
             Contains("grad can be implicitly created only for scalar outputs"));
  CHECK_THAT(error_of([&] { (x * 2.0).backward(f64({1, 2, 3})); }), Contains("mismatch in shape"));
  // A one-element output of any rank is a scalar for this purpose.
  Tensor one = leaf({2.0}, {1, 1});
  (one * one).backward();
  CHECK(values(one.grad()) == V{4});
}

// The op an error in backward is attributed to, from the node's name.
class NamedNode final : public autograd::Node {
 public:
  explicit NamedNode(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { return {}; }

 private:
  std::string name_;
};

TEST_CASE("engine: a node's forward op is its name without Backward<N>, in snake case", "[engine]") {
  CHECK(NamedNode("MulBackward0").forward_op() == "mul");
  CHECK(NamedNode("SumBackward1").forward_op() == "sum");
  CHECK(NamedNode("AddReluBackward0").forward_op() == "add_relu");
  CHECK(NamedNode("MaxPool2DWithIndicesBackward0").forward_op() == "max_pool2d_with_indices");
  CHECK(NamedNode("AdaptiveAvgPool2DBackward0").forward_op() == "adaptive_avg_pool2d");
  CHECK(NamedNode("DataParallelBackward").forward_op() == "data_parallel");
  // Where Ember's public name is not the derived one, the node says so.
  Tensor x = leaf({1.0, 2.0});
  CHECK(x.to(kFloat32).grad_fn()->forward_op() == "to");
  CHECK(x.clone().grad_fn()->forward_op() == "clone");
}

TEST_CASE("engine: backward needs a tensor that requires grad", "[engine]") {
  Tensor plain = f64({1, 2});
  CHECK_THAT(error_of([&] { plain.sum().backward(); }), Contains("does not require grad"));
}

TEST_CASE("engine: NoGradGuard records nothing and restores the previous mode", "[engine][grad_mode]") {
  Tensor x = leaf({1.0, 2.0});
  {
    NoGradGuard no_grad;
    Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    {
      EnableGradGuard enable;
      CHECK((x * 2.0).requires_grad());
    }
    CHECK_FALSE(GradMode::is_enabled());
  }
  CHECK(GradMode::is_enabled());
  Tensor y = x * 2.0;
  CHECK(y.requires_grad());
  CHECK(y.grad_fn() != nullptr);
}

TEST_CASE("engine: grad mode is per thread", "[engine][grad_mode]") {
  Tensor x = leaf({1.0, 2.0});
  // Both threads are inside their scopes at once: one with grad off, one recording.
  std::latch both_in_scope(2);
  bool recorded_elsewhere = false, recorded_here = true;
  std::thread other([&] {
    both_in_scope.arrive_and_wait();
    Tensor y = (x * x).sum();
    recorded_elsewhere = y.requires_grad();
    y.backward();
  });
  {
    NoGradGuard no_grad;
    both_in_scope.arrive_and_wait();
    recorded_here = (x * 3.0).requires_grad();
    other.join();
  }
  CHECK(recorded_elsewhere);
  CHECK_FALSE(recorded_here);
  CHECK(values(x.grad()) == V{2, 4});
}

TEST_CASE("engine: detach() cuts the graph but shares memory and version", "[engine]") {
  Tensor x = leaf({1.0, 3.0});
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.grad_fn() == nullptr);
  CHECK(d.data_ptr() == y.data_ptr());
  (y * d).sum().backward();  // only the y path carries gradient: d(y * d)/dx = 2 * d
  CHECK(values(x.grad()) == V{4, 12});
  const uint32_t before = y.version();
  d.mul_(f64({1.0}));
  CHECK(y.version() == before + 1);
}

TEST_CASE("engine: requires_grad_ rules", "[engine]") {
  CHECK_THAT(error_of([] { arange(3).requires_grad_(); }), Contains("only floating-point tensors"));
  Tensor x = leaf({1.0});
  Tensor y = x * 2.0;
  CHECK_THAT(error_of([&] { y.requires_grad_(false); }), Contains("only change requires_grad flags of leaf"));
  y.requires_grad_(true);  // already true: allowed
  CHECK(y.requires_grad());
  x.requires_grad_(false);
  CHECK_FALSE((x * 2.0).requires_grad());
  CHECK(zeros({2}, TensorOptions(kFloat64).requires_grad(true)).requires_grad());
  CHECK(randn({2}, TensorOptions(kFloat32).requires_grad(true)).is_leaf());
}

TEST_CASE("engine: integer results of differentiable inputs carry no history", "[engine]") {
  Tensor x = leaf({0.5, 2.0, -1.0});
  auto [values_out, indices] = x.max(0);
  CHECK(values_out.requires_grad());
  CHECK_FALSE(indices.requires_grad());
  CHECK_FALSE((x > f64({0.0})).requires_grad());
  CHECK_FALSE(x.argmax().requires_grad());
}

TEST_CASE("engine: retain_grad() keeps a non-leaf's gradient", "[engine]") {
  Tensor x = leaf({1.0, -2.0});
  Tensor y = x * 3.0;
  Tensor z = y * y;
  y.retain_grad();
  CHECK(y.retains_grad());
  CHECK_FALSE(z.retains_grad());
  Tensor loss = z.sum();
  loss.backward(Tensor(), /*retain_graph=*/true);
  CHECK(values(y.grad()) == V{6, -12});  // 2y
  CHECK_FALSE(z.grad().defined());
  loss.backward();
  CHECK(values(y.grad()) == V{12, -24});  // accumulates like a leaf's
  x.retain_grad();                        // a no-op on leaves
  CHECK_FALSE(x.retains_grad());
  CHECK_THAT(error_of([] { f64({1.0}).retain_grad(); }), Contains("doesn't require gradient"));
}

TEST_CASE("engine: retain_grad() follows the tensor through an in-place op", "[engine]") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = x * 2.0;
  y.retain_grad();
  int hook_calls = 0;
  y.register_hook([&](const Tensor& g) {
    ++hook_calls;
    CHECK(values(g) == V{15, 15});  // a hook stays with the value it was registered on: the old y
    return Tensor();
  });
  y.mul_(f64({3.0}));
  (y * 5.0).sum().backward();
  CHECK(values(y.grad()) == V{5, 5});  // the gradient of y's current value
  CHECK(hook_calls == 1);
  CHECK(values(x.grad()) == V{30, 30});
}

TEST_CASE("autograd::grad returns gradients without touching .grad", "[engine][grad]") {
  Tensor x = leaf({1.0, 2.0}), w = leaf({3.0, -1.0});
  w.set_grad(f64({100.0, 100.0}));
  Tensor y = x * w;
  Tensor loss = (y * x).sum();  // d/dx = 2xw, d/dw = x^2, d/dy = x
  std::vector<Tensor> g = autograd::grad({loss}, {x, w, y}, {}, /*retain_graph=*/true);
  REQUIRE(g.size() == 3);
  CHECK(values(g[0]) == V{6, -4});
  CHECK(values(g[1]) == V{1, 4});
  CHECK(values(g[2]) == V{1, 2});
  CHECK_FALSE(x.grad().defined());
  CHECK(values(w.grad()) == V{100, 100});

  SECTION("an explicit output gradient, and the graph kept for a later backward") {
    Tensor y2 = x * x;
    std::vector<Tensor> g2 = autograd::grad({y2}, {x}, {f64({0.5, -1.0})});
    CHECK(values(g2[0]) == V{1, -4});
    loss.backward();
    CHECK(values(x.grad()) == V{6, -4});
  }
  SECTION("several outputs add up") {
    std::vector<Tensor> g2 = autograd::grad({loss, (x * 5.0).sum()}, {x});
    CHECK(values(g2[0]) == V{11, 1});
  }
  SECTION("without retain_graph the graph is freed") {
    autograd::grad({loss}, {x});
    CHECK_THAT(error_of([&] { autograd::grad({loss}, {x}); }), Contains("backward through the graph a second time"));
  }
}

TEST_CASE("autograd::grad with inputs the outputs do not use", "[engine][grad]") {
  Tensor x = leaf({1.0, 2.0}), unused = leaf({5.0});
  Tensor loss = (x * x).sum();
  std::vector<Tensor> g = autograd::grad({loss}, {x, unused}, {}, /*retain_graph=*/true, /*allow_unused=*/true);
  CHECK(values(g[0]) == V{2, 4});
  CHECK_FALSE(g[1].defined());
  CHECK_THAT(error_of([&] { autograd::grad({loss}, {unused}, {}, true); }),
             Contains("not have been used in the graph"));
  CHECK_THAT(error_of([&] { autograd::grad({loss}, {f64({1.0})}, {}, true); }), Contains("does not require grad"));
}

TEST_CASE("engine: a leaf as the output", "[engine]") {
  Tensor x = leaf({1.0, 2.0});
  x.backward(f64({3.0, 4.0}));
  CHECK(values(x.grad()) == V{3, 4});
  std::vector<Tensor> g = autograd::grad({x}, {x}, {f64({5.0, 6.0})});
  CHECK(values(g[0]) == V{5, 6});
  CHECK(values(x.grad()) == V{3, 4});
}

TEST_CASE("autograd::grad with respect to an intermediate used twice", "[engine][grad]") {
  Tensor x = leaf({2.0, -1.0});
  Tensor h = x * 3.0;
  Tensor loss = (h * h + h).sum();  // d/dh = 2h + 1
  std::vector<Tensor> g = autograd::grad({loss}, {h});
  CHECK(values(g[0]) == V{13, -5});
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(h.grad().defined());
}

}  // namespace
}  // namespace ember::testing
