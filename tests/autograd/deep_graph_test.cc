// Long graphs: backward and the graph's destruction must not recurse per node (a 10,000-op chain
// would overflow the stack, sooner under ASan), and the walk must stay linear in the node count.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <time.h>

#include <cmath>

#include "tests/autograd/test_util.h"

namespace ember::testing {
namespace {

// This thread's CPU time: what the walk costs, which other processes on a loaded machine do not
// add to (in wall time 8,000 ops took up to 12x as long as 2,000 at load 9: 5 failures in 30 runs).
double thread_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// y = x * 1.0001 + 0.5, repeated: alternating two node kinds, dx/dy = 1.0001^(length / 2).
Tensor chain(const Tensor& x, int length) {
  Tensor y = x;
  for (int i = 0; i < length; ++i) y = i % 2 == 0 ? y * 1.0001 : y + 0.5;
  return y;
}

double seconds_for_backward(int length) {
  Tensor x = leaf({1.0, -0.5});
  Tensor y = chain(x, length).sum();
  const double start = thread_seconds();
  y.backward();
  return thread_seconds() - start;
}

TEST_CASE("deep graphs: a 10,000-op chain backpropagates", "[deep]") {
  Tensor x = leaf({1.0, -0.5});
  Tensor y = chain(x, 10000);
  y.sum().backward();
  const double expected = std::pow(1.0001, 5000);
  CHECK_THAT(values(x.grad()), Catch::Matchers::Approx(std::vector<double>{expected, expected}).epsilon(1e-12));
}

// Runs `body` on a thread with a 256 KiB stack, where per-node recursion over 10,000 nodes
// cannot fit (the main thread's 8 MiB would hide it until about 100,000 nodes).
template <typename F>
void on_small_stack(F body) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  auto trampoline = [](void* arg) -> void* {
    (*static_cast<F*>(arg))();
    return nullptr;
  };
  REQUIRE(pthread_create(&thread, &attr, trampoline, &body) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

TEST_CASE("deep graphs: a 10,000-node graph is destroyed without recursing", "[deep]") {
  Tensor x = leaf({1.0});
  Tensor y = chain(x, 10000);
  bool dropped = false;
  on_small_stack([&] {
    y = Tensor();  // the last reference to the whole chain
    dropped = true;
  });
  CHECK(dropped);
}

TEST_CASE("deep graphs: backward time grows linearly with the chain", "[deep]") {
  // CPU time, best of three. Four times the ops: a linear walk takes ~4x the time (4.3x measured),
  // a quadratic one ~16x.
  double short_chain = 1e9, long_chain = 1e9;
  for (int i = 0; i < 3; ++i) {
    short_chain = std::min(short_chain, seconds_for_backward(2000));
    long_chain = std::min(long_chain, seconds_for_backward(8000));
  }
  INFO("2,000 ops: " << short_chain << " s, 8,000 ops: " << long_chain << " s of CPU time");
  CHECK(long_chain < 8 * short_chain);
  CHECK(long_chain < 2.0);
}

}  // namespace
}  // namespace ember::testing
