// Backward from several threads at once: independent graphs must give exactly the single-thread
// gradients, and leaves shared by concurrent graphs must receive every contribution once.
// Run under ASan too; shapes stay below the thread pool's grain so results are bitwise stable.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "tests/autograd/test_util.h"

namespace ember::testing {
namespace {

using V = std::vector<double>;

constexpr int kThreads = 4;
constexpr int kIterations = 40;

struct Grads {
  V w1, w2, x;
  bool operator==(const Grads&) const = default;
};

// A two-layer network on input number `i`, its own leaves made inside: nothing is shared.
Grads run_network(int i) {
  Generator gen(1000 + i);
  const TensorOptions options(kFloat64);
  Tensor x = randn({3, 4}, options, &gen).requires_grad_();
  Tensor w1 = randn({4, 5}, options, &gen).requires_grad_();
  Tensor w2 = randn({5, 2}, options, &gen).requires_grad_();
  Tensor h = x.matmul(w1).tanh();
  Tensor loss = h.matmul(w2).square().mean() + w1.norm() * 0.1 + (h * x.sum({1}, true)).amax();
  loss.backward();
  return {values(w1.grad()), values(w2.grad()), values(x.grad())};
}

TEST_CASE("threads: independent graphs backpropagated concurrently", "[threads]") {
  std::vector<Grads> expected;
  for (int i = 0; i < kThreads; ++i) expected.push_back(run_network(i));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int it = 0; it < kIterations; ++it) {
        const int i = (t + it) % kThreads;  // every thread runs every network
        if (!(run_network(i) == expected[i])) ++mismatches;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(mismatches == 0);
}

TEST_CASE("threads: a leaf shared by concurrent graphs accumulates every contribution", "[threads]") {
  // Integer-valued gradients: their sum is exact whatever order the threads add in.
  Tensor w = leaf({0.5, -1.0, 2.0});
  std::atomic<int> post_hooks{0}, tensor_hooks{0};
  w.register_post_accumulate_grad_hook([&](const Tensor&) { ++post_hooks; });
  w.register_hook([&](const Tensor&) {
    ++tensor_hooks;
    return Tensor();
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Tensor x = f64({1.0 + t, 2.0, -3.0 * t});
      for (int it = 0; it < kIterations; ++it) ((w * x).sum() + (w * 2.0).sum()).backward();  // d/dw = x + 2
    });
  }
  for (std::thread& t : threads) t.join();
  V expected(3, 0.0);
  for (int t = 0; t < kThreads; ++t) {
    expected[0] += kIterations * (1.0 + t + 2);
    expected[1] += kIterations * (2.0 + 2);
    expected[2] += kIterations * (-3.0 * t + 2);
  }
  CHECK(values(w.grad()) == expected);
  CHECK(post_hooks == kThreads * kIterations);
  CHECK(tensor_hooks == kThreads * kIterations);
}

TEST_CASE("threads: concurrent backward through a shared, retained trunk", "[threads]") {
  Tensor w = leaf({1.0, 2.0, 4.0});
  Tensor trunk = w * 2.0 + 1.0;  // built once, walked by every thread
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int it = 0; it < kIterations; ++it) (trunk * static_cast<double>(t + 1)).sum().backward(Tensor(), true);
    });
  }
  for (std::thread& t : threads) t.join();
  const double per_iteration = 2.0 * (1 + 2 + 3 + 4);  // d/dw of sum over t of (t + 1) * trunk
  CHECK(values(w.grad()) == V(3, kIterations * per_iteration));
}

// Two passes without retain_graph meet in a shared trunk whose node saves a tensor (x * x saves
// x): the trunk's saved tensor is freed exactly once, by a pass that holds it alone, while the
// other pass is either still inside apply() (and completes) or arrives later and is refused with
// the second-time error. With a plain flag, one pass could free the saved tensor while the other
// was reading it (the ASan run of this test is what would see that).
TEST_CASE("threads: concurrent passes without retain_graph through a shared trunk free it once", "[threads]") {
  for (int round = 0; round < 200; ++round) {
    Tensor w = leaf({1.0, 2.0, 4.0});
    Tensor trunk = w * w;  // MulBackward saves w twice
    std::atomic<int> completed{0}, refused{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        try {
          (trunk * static_cast<double>(t + 1)).sum().backward();
          ++completed;
        } catch (const Error& e) {
          if (std::string(e.what()).find("backward through the graph a second time") != std::string::npos) ++refused;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    REQUIRE(completed + refused == 2);
    REQUIRE(completed >= 1);
    // d/dw of (t + 1) * w^2 = 2 (t + 1) w for each pass that completed: 2w, 4w, or both (6w).
    const V g = values(w.grad());
    const double k = g[0];  // w[0] is 1
    CHECK((completed == 2 ? k == 6.0 : (k == 2.0 || k == 4.0)));
    CHECK(g == V{k, 2 * k, 4 * k});
  }
}

}  // namespace
}  // namespace ember::testing
