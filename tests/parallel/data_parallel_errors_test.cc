// DataParallel's failures: autograd::grad refused, an error in one replica's forward, loss or
// backward (also while the others wait in a SyncBatchNorm exchange) reaching the caller with the
// replica named and without a hang, the same DataParallel working again afterwards, and
// construction errors that name the culprit.
#include <catch2/catch.hpp>

#include "autograd/engine.h"
#include "core/ember_core.h"
#include "cuda/api.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"
#include "parallel/data_parallel.h"
#include "parallel/replica_batch_norm.h"
#include "tests/parallel/data_parallel_helpers.h"

using namespace ember;
using namespace ember::testing;
using Catch::Contains;
using parallel::DataParallel;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kSide = 6;  // the smallest ConvNet takes
#else
constexpr int64_t kSide = 7;
#endif
// Generous: a hang is what it catches, not slowness (ASan, EMBER_EMU_DELAY).
constexpr double kHangSeconds = 120;

Tensor ce(const Tensor& out, const Tensor& target) { return cross_entropy(out, target); }

// After a failure: one training step through `dp` equals the same step of `reference` on cuda:0
// (whole batch), and the replicas ran again.
void expect_recovered(DataParallel& dp, nn::Module& reference, Generator& g, double tol = 1e-5) {
  INFO("the step after the failure");
  dp.module()->zero_grad();
  reference.zero_grad();
  const Tensor x = random_images(g, 10, 3, kSide, kSide),
               y = random_labels(g, 10, dp.module()->parameters().back().size(0));
  Tensor expected = ce(reference.forward(x.to(kCuda0)), y.to(kCuda0));
  expected.backward();
  Tensor actual = dp.forward_loss(x, y, ce).loss;
  check_close("loss", actual, expected, tol);
  actual.backward();
  CHECK(dp.last_replica_count() == std::min<size_t>(dp.device_ids().size(), 10));
  check_same_grads(*dp.module(), reference, 10 * tol);
}

}  // namespace

TEST_CASE("autograd::grad through DataParallel raises an Error naming DataParallel",
          "[data_parallel][errors][gpus:4]") {
  require_four_devices();
  manual_seed(131);
  auto model = std::make_shared<ConvNet>();
  model->to(kCuda0);
  auto dp = std::make_shared<DataParallel>(twin(model), cuda_devices(3));
  Generator g(132);
  const Tensor x = random_images(g, 10, 3, kSide, kSide), y = random_labels(g, 10, 5);
  const std::vector<Tensor> params = dp->parameters();
  {
    Watchdog watchdog("autograd::grad through DataParallel", kHangSeconds);
    Tensor loss = ce(dp->forward(x), y.to(kCuda0));
    const std::string message = error_of([&] { autograd::grad({loss}, {params.front()}); });
    CHECK_THAT(message, Contains("DataParallel") && Contains("autograd::grad") && Contains("backward()"));
    Tensor per_replica = dp->forward_loss(x, y, ce).loss;
    CHECK_THAT(error_of([&] { autograd::grad({per_replica}, params); }), Contains("DataParallel"));
  }
  // No gradient was written, and backward() still works afterwards.
  for (const Tensor& p : params) CHECK_FALSE(p.grad().defined());
  expect_recovered(*dp, *model, g);
}

TEST_CASE("an error in one replica's forward or loss names the replica and its device; the next call works",
          "[data_parallel][errors][gpus:4]") {
  require_four_devices();
  auto state = std::make_shared<ProbeState>();
  manual_seed(141);
  auto model = std::make_shared<ProbedNet>(state);
  model->to(kCuda0);
  auto dp = std::make_shared<DataParallel>(twin(model), cuda_devices(4));
  Generator g(142);
  const Tensor x = random_images(g, 10, 3, kSide, kSide), y = random_labels(g, 10, 5);
  Watchdog watchdog("failing replicas", kHangSeconds);
  for (int failing : {2, 0, 3}) {
    INFO("replica " << failing << " fails");
    state->fail_forward_on = failing;
    const std::string replica = "replica " + std::to_string(failing);
    const std::string device = "cuda:" + std::to_string(failing);
    CHECK_THAT(error_of([&] { dp->forward(x); }),
               Contains(replica) && Contains(device) && Contains("failing on purpose in the forward"));
    CHECK_THAT(error_of([&] { dp->forward_loss(x, y, ce); }), Contains(replica) && Contains(device));
    NoGradGuard no_grad;
    CHECK_THAT(error_of([&] { dp->forward(x); }), Contains(replica) && Contains(device));
  }
  state->fail_forward_on = -1;
  expect_recovered(*dp, *model, g);

  // The loss function failing in one replica (it sees the replica's target chunk).
  auto failing_loss = [](const Tensor& o, const Tensor& t) {
    EMBER_CHECK(t.device() != Device::cuda(1), "loss: failing on purpose");
    return ce(o, t);
  };
  CHECK_THAT(error_of([&] { dp->forward_loss(x, y, failing_loss); }),
             Contains("replica 1") && Contains("cuda:1") && Contains("loss: failing on purpose"));
  // A loss that is not a scalar.
  CHECK_THAT(error_of([&] { dp->forward_loss(x, y, [](const Tensor& o, const Tensor&) { return o; }); }),
             Contains("scalar"));
  expect_recovered(*dp, *model, g);
}

TEST_CASE("an error in one replica's backward names the replica; the next step works",
          "[data_parallel][errors][gpus:4]") {
  require_four_devices();
  auto state = std::make_shared<ProbeState>();
  manual_seed(151);
  auto model = std::make_shared<ProbedNet>(state);
  model->to(kCuda0);
  auto dp = std::make_shared<DataParallel>(twin(model), cuda_devices(4));
  Generator g(152);
  // The probe's hook is on its output, which needs a gradient when the input does.
  Tensor x = random_images(g, 10, 3, kSide, kSide);
  x.requires_grad_(true);
  const Tensor y = random_labels(g, 10, 5);
  Watchdog watchdog("a failing replica backward", kHangSeconds);
  for (bool per_replica : {false, true}) {
    INFO((per_replica ? "forward_loss" : "forward"));
    state->fail_backward_on = 2;
    Tensor loss = per_replica ? dp->forward_loss(x, y, ce).loss : ce(dp->forward(x), y.to(kCuda0));
    CHECK_THAT(error_of([&] { loss.backward(); }),
               Contains("replica 2") && Contains("cuda:2") && Contains("failing on purpose in the backward"));
  }
  state->fail_backward_on = -1;
  expect_recovered(*dp, *model, g);
}

namespace {

// Probe -> Conv -> SyncBatchNorm -> Probe -> Linear: a forward failure in the first probe leaves the
// other replicas waiting for the statistics exchange, a backward failure in the second one leaves
// them waiting for the gradient sums.
struct SyncFaultNet : nn::Cloneable<SyncFaultNet> {
  SyncFaultNet(std::shared_ptr<ProbeState> before, std::shared_ptr<ProbeState> after)
      : Cloneable("SyncFaultNet"), before_state(std::move(before)), after_state(std::move(after)) {
    reset();
  }
  void reset() override {
    before = register_module("before", std::make_shared<Probe>(before_state));
    conv = register_module("conv", nn::Conv2d(3, 4, 3));
    bn = register_module("bn", nn::BatchNorm2d(4));
    after = register_module("after", std::make_shared<Probe>(after_state));
    head = register_module("head", nn::Linear(4, 5));
  }
  Tensor forward(const Tensor& x) override {
    return head(adaptive_avg_pool2d(after->forward(bn(conv(before->forward(x)))), 1).flatten(1));
  }
  std::shared_ptr<ProbeState> before_state, after_state;
  std::shared_ptr<Probe> before, after;
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
  nn::Linear head{nullptr};
};

}  // namespace

TEST_CASE("a replica failing while the others wait in a SyncBatchNorm exchange: no hang, the replica named",
          "[data_parallel][errors][batch_norm][gpus:4]") {
  require_four_devices();
  auto before = std::make_shared<ProbeState>(), after = std::make_shared<ProbeState>();
  manual_seed(161);
  auto model = std::make_shared<SyncFaultNet>(before, after);
  REQUIRE(parallel::convert_sync_batchnorm(*model) == 1);
  model->to(kCuda0);
  auto dp = std::make_shared<DataParallel>(twin(model), cuda_devices(4));
  Generator g(162);
  const Tensor x = random_images(g, 11, 3, kSide, kSide), y = random_labels(g, 11, 5);
  Watchdog watchdog("SyncBatchNorm exchange with a failed replica", kHangSeconds);
  // Forward: replica 2 fails before its statistics; 0, 1 and 3 wait for them.
  for (int failing : {2, 0}) {
    before->fail_forward_on = failing;
    const std::string message = error_of([&] { dp->forward_loss(x, y, ce); });
    CHECK_THAT(message, Contains("replica " + std::to_string(failing) + " on cuda:" + std::to_string(failing)) &&
                            Contains("failing on purpose in the forward"));
  }
  before->fail_forward_on = -1;
  // Backward: replica 3 fails after the loss, before SyncBatchNorm's backward; the others wait
  // for its gradient sums.
  after->fail_backward_on = 3;
  Tensor loss = dp->forward_loss(x, y, ce).loss;
  CHECK_THAT(error_of([&] { loss.backward(); }),
             Contains("replica 3") && Contains("cuda:3") && Contains("failing on purpose in the backward"));
  after->fail_backward_on = -1;
  // Everything works again: SyncBatchNorm across the replicas equals whole-batch BatchNorm.
  auto reference = twin(dp->module());
  expect_recovered(*dp, *reference, g);
  check_same_state(*dp->module(), *reference);  // the running statistics too
}

TEST_CASE("construction errors name the culprit", "[data_parallel][errors][gpus:4]") {
  require_four_devices();
  manual_seed(171);
  auto model = std::make_shared<ConvNet>();
  model->to(kCuda0);
  const Device missing = Device::cuda(std::max(9, cuda::device_count()));
  auto make = [&](std::vector<Device> ids, std::optional<Device> output = std::nullopt) {
    return error_of([&] { DataParallel dp(model, std::move(ids), output); });
  };
  CHECK_THAT(make({kCuda0, Device(kCPU)}), Contains("device_ids[1] is cpu") && Contains("CUDA"));
  CHECK_THAT(make({kCuda0, missing}), Contains("device_ids[1] is " + missing.str()) && Contains("not available"));
  CHECK_THAT(make({kCuda0, Device::cuda(1), Device::cuda(2), Device::cuda(1)}),
             Contains("cuda:1 twice") && Contains("entries 1 and 3"));
  CHECK_THAT(make({kCuda0, Device::cuda(1)}, missing), Contains(missing.str()));
  // The module must be on device_ids[0].
  CHECK_THAT(make({Device::cuda(2), kCuda0}),
             Contains("features.0.weight") && Contains("cuda:0") && Contains("device_ids[0] = cuda:2"));
  auto on_one = twin(model, Device::cuda(1));
  CHECK_THAT(error_of([&] { DataParallel dp(on_one, cuda_devices(2)); }),
             Contains("parameter 'features.0.weight' is on cuda:1") && Contains("device_ids[0] = cuda:0"));
  auto on_cpu = twin(model, Device(kCPU));
  CHECK_THAT(error_of([&] { DataParallel dp(on_cpu); }), Contains("is on cpu") && Contains("cuda:0"));
  CHECK_THAT(error_of([&] { DataParallel dp(nullptr, cuda_devices(2)); }), Contains("null"));
  // A wrapped module's parameters moved off device_ids[0] afterwards.
  auto moved = twin(model);
  DataParallel dp(moved, cuda_devices(2));
  moved->to(Device::cuda(1));
  Generator g(172);
  CHECK_THAT(error_of([&] { dp.forward(random_images(g, 4, 3, kSide, kSide)); }),
             Contains("moved to cuda:1") && Contains("device_ids[0] = cuda:0"));
  // A bad forward: an input empty along dim, or with too few dimensions for it.
  DataParallel fine(twin(model), cuda_devices(2), std::nullopt, 1);
  CHECK_THAT(error_of([&] { fine.forward(randn({3})); }), Contains("dim 1"));
}
