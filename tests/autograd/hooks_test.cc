// Tensor hooks (leaves and non-leaves: order, replacement, removal) and post-accumulate-grad
// hooks on leaves, including when they fire relative to the rest of the backward walk, which is
// what DDP relies on to start all-reduces while backward is still running.
#include <catch2/catch.hpp>

#include <string>

#include "autograd/engine.h"
#include "tests/autograd/test_util.h"

namespace ember::testing {
namespace {

using Catch::Matchers::Contains;
using V = std::vector<double>;
using Events = std::vector<std::string>;

TEST_CASE("hooks: leaf hooks run in registration order and may replace the gradient", "[hooks]") {
  Tensor x = leaf({1.0, 2.0});
  Events events;
  V seen_first, seen_second;
  x.register_hook([&](const Tensor& g) {
    events.push_back("first");
    seen_first = values(g);
    return g * 2.0;
  });
  x.register_hook([&](const Tensor& g) {
    events.push_back("second");
    seen_second = values(g);
    return Tensor();  // undefined: keep the gradient as it is
  });
  (x * 3.0).sum().backward();
  CHECK(events == Events{"first", "second"});
  CHECK(seen_first == V{3, 3});
  CHECK(seen_second == V{6, 6});
  CHECK(values(x.grad()) == V{6, 6});
}

TEST_CASE("hooks: non-leaf hooks see the summed gradient once and change what flows on", "[hooks]") {
  Tensor x = leaf({1.0, -2.0});
  Tensor y = x * x;
  Events events;
  V seen;
  y.register_hook([&](const Tensor& g) {
    events.push_back("scale");
    seen = values(g);
    return g * 10.0;
  });
  y.register_hook([&](const Tensor& g) {
    events.push_back("observe");
    CHECK(values(g) == V{40, 40});
    return Tensor();
  });
  (y * 3.0 + y).sum().backward();  // two uses of y: one hook call with 3 + 1
  CHECK(events == Events{"scale", "observe"});
  CHECK(seen == V{4, 4});
  CHECK(values(x.grad()) == V{40 * 2 * 1.0, 40 * 2 * -2.0});
}

TEST_CASE("hooks: a leaf hook sees the gradient reduced to the leaf's shape", "[hooks]") {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Shape seen;
  x.register_hook([&](const Tensor& g) {
    seen = g.sizes();
    return Tensor();
  });
  (x + zeros({2, 3}, kFloat64)).sum().backward();
  CHECK(seen == Shape{3});
  CHECK(values(x.grad()) == V{2, 2, 2});
}

TEST_CASE("hooks: remove_hook", "[hooks]") {
  Tensor x = leaf({1.0});
  Tensor y = x * 2.0;
  Events events;
  size_t leaf_removed = x.register_hook([&](const Tensor&) {
    events.push_back("leaf removed");
    return Tensor();
  });
  x.register_hook([&](const Tensor&) {
    events.push_back("leaf kept");
    return Tensor();
  });
  size_t inner_removed = y.register_hook([&](const Tensor& g) {
    events.push_back("inner removed");
    return g * 100.0;
  });
  y.register_hook([&](const Tensor&) {
    events.push_back("inner kept");
    return Tensor();
  });
  x.remove_hook(leaf_removed);
  y.remove_hook(inner_removed);
  y.remove_hook(987654);  // unknown handles are ignored
  y.sum().backward();
  CHECK(events == Events{"inner kept", "leaf kept"});
  CHECK(values(x.grad()) == V{2});
}

TEST_CASE("hooks: register_hook needs a tensor that requires grad", "[hooks]") {
  CHECK_THAT(error_of([] { f64({1.0}).register_hook([](const Tensor& g) { return g; }); }),
             Contains("doesn't require gradient"));
}

TEST_CASE("hooks: the post-accumulate hook sees the final .grad once per backward", "[hooks][post_accumulate]") {
  Tensor x = leaf({1.0, 2.0});
  std::vector<V> seen;
  x.register_post_accumulate_grad_hook([&](const Tensor& t) {
    CHECK(t.is_same(x));
    seen.push_back(values(t.grad()));
  });
  (x * x + x * 3.0).sum().backward();  // two paths into x, one call with both summed
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == V{5, 7});
  (x * 2.0).sum().backward();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == V{7, 9});  // after accumulating into the existing .grad
}

TEST_CASE("hooks: post-accumulate hooks are for leaves that require grad; removable", "[hooks][post_accumulate]") {
  Tensor x = leaf({1.0});
  CHECK_THAT(error_of([&] { (x * 2.0).register_post_accumulate_grad_hook([](const Tensor&) {}); }),
             Contains("only be registered on leaf tensors"));
  CHECK_THAT(error_of([] { f64({1.0}).register_post_accumulate_grad_hook([](const Tensor&) {}); }),
             Contains("only be registered on leaf tensors"));
  int calls = 0;
  size_t handle = x.register_post_accumulate_grad_hook([&](const Tensor&) { ++calls; });
  (x * 2.0).sum().backward();
  x.remove_hook(handle);
  (x * 2.0).sum().backward();
  CHECK(calls == 1);
}

TEST_CASE("hooks: autograd::grad accumulates nothing, so it fires no post-accumulate hook",
          "[hooks][post_accumulate]") {
  Tensor x = leaf({1.0});
  int calls = 0;
  x.register_post_accumulate_grad_hook([&](const Tensor&) { ++calls; });
  std::vector<Tensor> g = autograd::grad({(x * 2.0).sum()}, {x});
  CHECK(values(g[0]) == V{2});
  CHECK(calls == 0);
}

// x0 -> layer1(w1) -> layer2(w2) -> layer3(w3) -> loss. The hook of each weight must fire as
// soon as its gradient is final, before the engine works on earlier layers: w3's before the
// gradient of h2 (layer2's output) is even computed, and while w1 has no gradient yet.
TEST_CASE("hooks: post-accumulate hooks fire during the walk, last layer first", "[hooks][post_accumulate]") {
  Generator gen(11);
  const TensorOptions options(kFloat64);
  Tensor x0 = randn({4, 3}, options, &gen);
  Tensor w1 = randn({3, 5}, options, &gen).requires_grad_();
  Tensor w2 = randn({5, 5}, options, &gen).requires_grad_();
  Tensor w3 = randn({5, 2}, options, &gen).requires_grad_();
  Events events;
  bool w1_pending_at_w3 = false, w2_pending_at_w3 = false;
  V w3_grad_in_hook;
  w3.register_post_accumulate_grad_hook([&](const Tensor& w) {
    events.push_back("w3");
    w1_pending_at_w3 = !w1.grad().defined();
    w2_pending_at_w3 = !w2.grad().defined();
    w3_grad_in_hook = values(w.grad());
  });
  w2.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("w2"); });
  w1.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("w1"); });
  auto forward = [&] {
    Tensor h1 = x0.matmul(w1).tanh();
    h1.register_hook([&](const Tensor&) {
      events.push_back("h1");
      return Tensor();
    });
    Tensor h2 = h1.matmul(w2).tanh();
    h2.register_hook([&](const Tensor&) {
      events.push_back("h2");
      return Tensor();
    });
    return h2.matmul(w3).square().mean();
  };

  // The previous step's loss (and so its graph) is often still alive during the next forward,
  // e.g. `loss = forward(); loss.backward();` in a loop: the weights' gradient sinks then
  // predate every node of the new graph, and must still run as soon as they are ready.
  Tensor loss;
  for (int step = 0; step < 2; ++step) {
    INFO("step " << step);
    events.clear();
    for (Tensor* w : {&w1, &w2, &w3}) w->set_grad(Tensor());
    loss = forward();
    loss.backward();
    CHECK(events == Events{"w3", "h2", "w2", "h1", "w1"});
    CHECK(w1_pending_at_w3);
    CHECK(w2_pending_at_w3);
    CHECK(w3_grad_in_hook == values(w3.grad()));  // final when the hook ran
  }
}

TEST_CASE("hooks: a weight used by two layers fires once, after both contributions", "[hooks][post_accumulate]") {
  Tensor w = leaf({0.5, -1.0, 2.0});
  Tensor x = f64({1.0, 2.0, 3.0});
  Events events;
  w.register_post_accumulate_grad_hook([&](const Tensor&) { events.push_back("w"); });
  Tensor h = x * w;
  h.register_hook([&](const Tensor&) {
    events.push_back("h");
    return Tensor();
  });
  (h * w).sum().backward();  // d/dw = 2 x w
  CHECK(events == Events{"h", "w"});
  CHECK(values(w.grad()) == V{1, -4, 12});
}

}  // namespace
}  // namespace ember::testing
