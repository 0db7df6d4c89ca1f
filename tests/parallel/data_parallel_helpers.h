// Shared pieces of the DataParallel tests: small models (a nested conv net, one with batch norm, one
// that fails on a chosen device), random channels-last batches, comparisons scaled by the reference's
// magnitude, and a watchdog that turns a hang into a failure. The reference for every check is the
// same model on cuda:0 with the whole batch.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "cuda/conv.h"
#include "nn/nn.h"
#include "parallel/data_parallel.h"
#include "tests/autograd/test_util.h"  // error_of

namespace ember::testing {

inline const Device kCuda0 = Device::cuda(0);

inline std::vector<Device> cuda_devices(int n) {
  std::vector<Device> out;
  for (int i = 0; i < n; ++i) out.push_back(Device::cuda(i));
  return out;
}

// Every case needs four devices (EMBER_EMULATED_GPUS=4 in the BUILD file; real GPUs for _gpu), and
// comparisons within 1e-5 need float32 convolutions without TF32 (on by default on real GPUs).
inline void require_four_devices() {
  REQUIRE(cuda::device_count() >= 4);
  cuda::set_cudnn_allow_tf32(false);
}

// Conv -> ReLU -> MaxPool -> Conv -> ReLU in a Sequential, inside a module that adds global
// average pooling and a Linear head: names read "features.0.weight", "head.bias".
struct ConvNet : nn::Cloneable<ConvNet> {
  ConvNet(int64_t in = 3, int64_t width = 6, int64_t classes = 5)
      : Cloneable("ConvNet"), in(in), width(width), classes(classes) {
    reset();
  }
  void reset() override {
    features =
        register_module("features", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, width, 3).padding(1)), nn::ReLU(),
                                                   nn::MaxPool2d(2), nn::Conv2d(width, width + 2, 3), nn::ReLU()));
    head = register_module("head", nn::Linear(width + 2, classes));
  }
  Tensor forward(const Tensor& x) override { return head(adaptive_avg_pool2d(features(x), 1).flatten(1)); }
  int64_t in, width, classes;
  nn::Sequential features{nullptr};
  nn::Linear head{nullptr};
};

// Conv -> BatchNorm2d -> ReLU -> pooling -> Linear: running statistics are buffers to replicate.
struct BnNet : nn::Cloneable<BnNet> {
  BnNet() : Cloneable("BnNet") { reset(); }
  void reset() override {
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(3, 5, 3).padding(1).bias(false)));
    bn = register_module("bn", nn::BatchNorm2d(5));
    head = register_module("head", nn::Linear(5, 4));
  }
  Tensor forward(const Tensor& x) override { return head(adaptive_avg_pool2d(bn(conv(x)).relu(), 1).flatten(1)); }
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
  nn::Linear head{nullptr};
};

// What Probe saw and what it is told to do; shared by a Probe and its clones (the replicas).
struct ProbeState {
  std::atomic<int64_t> rows[8] = {};      // rows (size along dim 0) of the last input per device index
  std::atomic<int> grad_mode[8] = {};     // GradMode::is_enabled() in the last forward per device (1/0)
  std::atomic<int> fail_forward_on{-1};   // forward raises on this cuda device index
  std::atomic<int> fail_backward_on{-1};  // the gradient through the probe raises on this one
  void clear_rows() {
    for (auto& r : rows) r = 0;
    for (auto& m : grad_mode) m = -1;
  }
};

// An identity layer that records its input's rows per device and fails on purpose where told.
struct Probe : nn::Cloneable<Probe> {
  explicit Probe(std::shared_ptr<ProbeState> state) : Cloneable("Probe"), state(std::move(state)) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override {
    const Device device = x.device();
    const int index = device.is_cuda() ? device.index : 7;
    state->rows[index] = x.size(0);
    state->grad_mode[index] = GradMode::is_enabled() ? 1 : 0;
    // The messages leave the device out: naming it is DataParallel's job.
    EMBER_CHECK(state->fail_forward_on != index, "Probe: failing on purpose in the forward");
    if (!x.requires_grad()) return x;
    Tensor y = x * 1.0;
    std::shared_ptr<ProbeState> s = state;
    y.register_hook([s, device](const Tensor& grad) -> Tensor {
      if (s->fail_backward_on == device.index) throw Error("Probe: failing on purpose in the backward");
      return Tensor();
    });
    return y;
  }
  std::shared_ptr<ProbeState> state;
};

// ConvNet behind a Probe: "probe" then "net.features.0.weight", ...
struct ProbedNet : nn::Cloneable<ProbedNet> {
  explicit ProbedNet(std::shared_ptr<ProbeState> state) : Cloneable("ProbedNet"), state(std::move(state)) { reset(); }
  void reset() override {
    probe = register_module("probe", std::make_shared<Probe>(state));
    net = register_module("net", std::make_shared<ConvNet>());
  }
  Tensor forward(const Tensor& x) override { return net->forward(probe->forward(x)); }
  std::shared_ptr<ProbeState> state;
  std::shared_ptr<Probe> probe;
  std::shared_ptr<ConvNet> net;
};

// A deep copy of `model` on `device` (the reference twin of a model DataParallel will train).
template <typename M>
std::shared_ptr<M> twin(const std::shared_ptr<M>& model, Device device = kCuda0) {
  return std::dynamic_pointer_cast<M>(model->clone(device));
}

// A channels-last view [n, c, h, w] of random data (strides not those of a contiguous tensor).
inline Tensor random_images(Generator& g, int64_t n, int64_t c, int64_t h, int64_t w) {
  return randn({n, h, w, c}, {}, &g).permute({0, 3, 1, 2});
}

inline Tensor random_labels(Generator& g, int64_t n, int64_t classes) {
  return randint(0, classes, {n}, TensorOptions(kInt64), &g);
}

// max |actual - expected| / max(max |expected|, floor): the error on the scale of the reference,
// in float64 on the CPU.
inline double scaled_error(const Tensor& actual, const Tensor& expected, double floor = 1e-3) {
  const Tensor a = actual.cpu().to(kFloat64), e = expected.cpu().to(kFloat64);
  const double error = (a - e).abs().amax().item<double>();
  return error / std::max(e.abs().amax().item<double>(), floor);
}

inline void check_close(const std::string& what, const Tensor& actual, const Tensor& expected, double tol = 1e-5) {
  INFO(what);
  REQUIRE(actual.defined());
  REQUIRE(expected.defined());
  REQUIRE(actual.sizes() == expected.sizes());
  const double error = scaled_error(actual, expected);
  INFO("scaled error " << error << " (tolerance " << tol << ")");
  CHECK(error <= tol);
}

// Every parameter (and, with buffers, every floating buffer; integer ones must be equal).
inline void check_same_state(const nn::Module& actual, const nn::Module& expected, double tol = 1e-5,
                             bool buffers = true) {
  auto a = actual.named_parameters(), e = expected.named_parameters();
  if (buffers) {
    for (auto& b : actual.named_buffers()) a.push_back(b);
    for (auto& b : expected.named_buffers()) e.push_back(b);
  }
  REQUIRE(a.size() == e.size());
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].first == e[i].first);
    if (a[i].second.is_floating_point()) {
      check_close(a[i].first, a[i].second, e[i].second, tol);
    } else {
      INFO(a[i].first);
      CHECK(a[i].second.cpu().eq(e[i].second.cpu()).logical_not().sum().item<int64_t>() == 0);
    }
  }
}

inline void check_same_grads(const nn::Module& actual, const nn::Module& expected, double tol = 1e-5) {
  auto a = actual.named_parameters(), e = expected.named_parameters();
  REQUIRE(a.size() == e.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    REQUIRE(a[i].second.grad().defined() == e[i].second.grad().defined());
    if (e[i].second.grad().defined()) {
      CHECK(a[i].second.grad().device() == a[i].second.device());
      check_close(a[i].first + ".grad", a[i].second.grad(), e[i].second.grad(), tol);
    }
  }
}

// A hang becomes a failure with a name: if the scope is not left within `seconds`, the process
// prints `what` and exits (a deadlocked replica cannot be unwound).
class Watchdog {
 public:
  Watchdog(std::string what, double seconds) : what_(std::move(what)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return done_; })) {
        std::fprintf(stderr, "Watchdog: '%s' did not finish within %.0f s (a hang)\n", what_.c_str(), seconds);
        std::fflush(stderr);
        std::_Exit(3);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace ember::testing
