// A LeNet-sized forward and backward (convolution and linear layers: oneDNN's sgemm, convolution
// and reorder kernels on two threads) under a storm of SIGUSR2, sent to every thread of the process
// while a do-nothing handler is installed, as a profiler or a job scheduler would. Before Ember held
// signals around oneDNN's calls (core/cpu/dnnl/runtime.h, SignalsHeld), a handler run inside one of
// its JIT GEMM kernels wrote its frame over the heap: glibc aborted ("corrupted size vs. prev_size").
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "autograd/functional.h"
#include "core/factory.h"
#include "core/ops.h"
#include "core/random.h"

namespace {

std::atomic<long> handled{0};
void count_signal(int) { handled.fetch_add(1, std::memory_order_relaxed); }

// Sends SIGUSR2 to each thread of the process in turn (the list re-read now and then, as OpenMP
// starts its workers), about every 20 microseconds, until destroyed.
class SignalStorm {
 public:
  SignalStorm() {
    struct sigaction action {};
    action.sa_handler = &count_signal;
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &action, &previous_);
    sender_ = std::thread([this] { run(); });
  }
  ~SignalStorm() {
    stop_.store(true);
    sender_.join();
    sigaction(SIGUSR2, &previous_, nullptr);
  }
  long sent() const { return sent_.load(); }

 private:
  void run() {
    const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
    std::vector<pid_t> threads;
    for (long round = 0; !stop_.load(); ++round) {
      if (round % 256 == 0) {
        threads.clear();
        for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
          const pid_t tid = static_cast<pid_t>(std::stol(entry.path().filename().string()));
          if (tid != self) threads.push_back(tid);
        }
      }
      for (pid_t tid : threads)
        if (syscall(SYS_tgkill, getpid(), tid, SIGUSR2) == 0) sent_.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  struct sigaction previous_ {};
  std::thread sender_;
  std::atomic<bool> stop_{false};
  std::atomic<long> sent_{0};
};

// One step's gradients of a LeNet-like network on fixed inputs.
std::vector<ember::Tensor> lenet_gradients(const std::vector<ember::Tensor>& parameters, const ember::Tensor& x) {
  using namespace ember;
  for (const Tensor& p : parameters) p.set_grad(Tensor());
  Tensor h = relu(conv2d(x, parameters[0], parameters[1]));         // [32, 6, 24, 24]
  h = relu(conv2d(h, parameters[2], parameters[3], /*stride=*/2));  // [32, 16, 10, 10]
  h = relu(linear(h.reshape({x.size(0), 16 * 10 * 10}), parameters[4], parameters[5]));
  Tensor out = linear(h, parameters[6], parameters[7]);
  (out * out).sum().backward();
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) grads.push_back(p.grad().clone());
  return grads;
}

}  // namespace

TEST_CASE("oneDNN's kernels under a storm of handled signals give the same gradients and leave the heap intact") {
  using namespace ember;
  manual_seed(7);
  const Tensor x = randn({32, 1, 28, 28});
  std::vector<Tensor> parameters;
  for (const Shape& shape :
       std::vector<Shape>{{6, 1, 5, 5}, {6}, {16, 6, 5, 5}, {16}, {120, 1600}, {120}, {10, 120}, {10}})
    parameters.push_back((randn(shape) * 0.1).requires_grad_());
  const std::vector<Tensor> expected = lenet_gradients(parameters, x);

  // At least 3 s and 5 steps, and until the handler ran 1000 times (signals held during oneDNN's
  // calls are delivered after them): the storm must have reached the handler, or nothing was tested.
  int steps = 0;
  {
    SignalStorm storm;
    const auto start = std::chrono::steady_clock::now();
    const auto elapsed = [&] { return std::chrono::steady_clock::now() - start; };
    while (elapsed() < std::chrono::seconds(3) || steps < 5 || handled.load() < 1000) {
      INFO("signals sent " << storm.sent() << ", handled " << handled.load());
      REQUIRE(elapsed() < std::chrono::seconds(60));
      const std::vector<Tensor> grads = lenet_gradients(parameters, x);
      for (size_t i = 0; i < grads.size(); ++i) {
        INFO("step " << steps << ", parameter " << i);
        REQUIRE(grads[i].to_vector<float>() == expected[i].to_vector<float>());
      }
      ++steps;
    }
  }
  // glibc checks a chunk's neighbours when it is freed or merged: churn the heap once more.
  std::vector<std::vector<char>> churn;
  for (int i = 0; i < 4000; ++i) {
    churn.emplace_back(static_cast<size_t>(1 + i * 37 % 5000));
    if (i % 3 == 0) churn.erase(churn.begin() + i % static_cast<int>(churn.size()));
  }
}
