// DataParallel training equals training on one device: K SGD steps through 2, 3 and 4 replicas
// (gathered output and per-replica losses, mean and sum), uneven splits and batches smaller than
// the device count, BatchNorm as PyTorch's DataParallel runs it and SyncBatchNorm across replicas,
// gradient accumulation and retain_graph. The reference is the same model on cuda:0 with the
// whole batch; inputs are random channels-last views of odd sizes.
#include <catch2/catch.hpp>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"
#include "parallel/data_parallel.h"
#include "parallel/replica_batch_norm.h"
#include "tests/parallel/data_parallel_helpers.h"

using namespace ember;
using namespace ember::testing;
using parallel::DataParallel;
using parallel::LossReduction;

namespace {

// Under AddressSanitizer the emulator runs ~15x slower: smaller images, fewer steps, and fewer
// device counts below. kBatch splits unevenly on 2, 3 and 4 devices.
#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kSide = 6;   // the smallest ConvNet takes
constexpr int64_t kBatch = 7;  // 4+3, 3+2+2, 2+2+2+1
constexpr int kSteps = 2;
#else
constexpr int64_t kSide = 9;
constexpr int64_t kBatch = 13;  // 7+6, 5+4+4, 4+3+3+3
constexpr int kSteps = 3;
#endif

enum class LossMode { kGathered, kReplicaMean, kReplicaSum };

const char* mode_name(LossMode mode) {
  switch (mode) {
    case LossMode::kGathered:
      return "forward() + cross_entropy on cuda:0";
    case LossMode::kReplicaMean:
      return "forward_loss(cross_entropy, kMean)";
    case LossMode::kReplicaSum:
      return "forward_loss(mse_loss summed, kSum)";
  }
  return "";
}

Tensor correct_count(const Tensor& out, const Tensor& t) { return out.argmax(1).eq(t).to(kFloat32).sum(); }

struct Batch {
  Tensor x, y;
};

// Class labels, or (for the summed mse) float targets of the model's output shape.
Batch random_batch(Generator& g, int64_t n, int64_t classes, LossMode mode) {
  Batch b{random_images(g, n, 3, kSide, kSide + 2), Tensor()};
  b.y = mode == LossMode::kReplicaSum ? randn({n, classes}, {}, &g) : random_labels(g, n, classes);
  return b;
}

// `correct` (when given) receives the count of correct predictions, for the metric's check.
Tensor reference_loss(nn::Module& model, const Batch& b, LossMode mode, Tensor* correct = nullptr) {
  Tensor out = model.forward(b.x.to(kCuda0));
  if (correct != nullptr) *correct = correct_count(out.detach(), b.y.to(kCuda0)).cpu();
  return mode == LossMode::kReplicaSum ? mse_loss(out, b.y.to(kCuda0), Reduction::Sum)
                                       : cross_entropy(out, b.y.to(kCuda0));
}

Tensor parallel_loss(DataParallel& dp, const Batch& b, LossMode mode, const Tensor& expected_correct = {}) {
  switch (mode) {
    case LossMode::kGathered: {
      Tensor out = dp.forward(b.x);
      REQUIRE(out.device() == kCuda0);
      return cross_entropy(out, b.y.to(kCuda0));
    }
    case LossMode::kReplicaMean: {
      parallel::ReplicaLoss r = dp.forward_loss(
          b.x, b.y, [](const Tensor& o, const Tensor& t) { return cross_entropy(o, t); }, LossReduction::kMean,
          correct_count);
      REQUIRE(r.loss.device() == kCuda0);
      REQUIRE(r.loss.dim() == 0);
      if (expected_correct.defined()) {
        CHECK(r.metric.item<double>() == expected_correct.item<double>());
        CHECK_FALSE(r.metric.requires_grad());
      }
      return r.loss;
    }
    case LossMode::kReplicaSum: {
      return dp
          .forward_loss(
              b.x, b.y, [](const Tensor& o, const Tensor& t) { return mse_loss(o, t, Reduction::Sum); },
              LossReduction::kSum)
          .loss;
    }
  }
  return Tensor();
}

// Trains `model` on cuda:0 with whole batches of the given sizes, and its twin through
// DataParallel on `n` devices with the same batches: after every step the losses and, at the end,
// the gradients, parameters and buffers agree within `tol` of the reference's scale.
void expect_trains_like_one_device(const std::shared_ptr<nn::Module>& model, int n, const std::vector<int64_t>& batches,
                                   LossMode mode, int64_t classes, uint64_t seed, double tol = 1e-5) {
  INFO(mode_name(mode) << " on " << n << " devices");
  model->to(kCuda0);
  auto master = model->clone(kCuda0);
  auto dp = std::make_shared<DataParallel>(master, cuda_devices(n));
  const double lr = mode == LossMode::kReplicaSum ? 0.005 : 0.1;
  optim::SGD reference_opt(model->parameters(), optim::SGDOptions(lr).momentum(0.9));
  optim::SGD parallel_opt(master->parameters(), optim::SGDOptions(lr).momentum(0.9));
  Generator g(seed);
  for (size_t step = 0; step < batches.size(); ++step) {
    INFO("step " << step << ", batch " << batches[step]);
    const Batch b = random_batch(g, batches[step], classes, mode);
    reference_opt.zero_grad();
    parallel_opt.zero_grad();
    Tensor expected_correct;
    Tensor expected = reference_loss(*model, b, mode, mode == LossMode::kReplicaMean ? &expected_correct : nullptr);
    expected.backward();
    Tensor actual = parallel_loss(*dp, b, mode, expected_correct);
    CHECK(dp->last_replica_count() == static_cast<size_t>(std::min<int64_t>(n, batches[step])));
    check_close("loss", actual, expected, tol);
    actual.backward();
    if (step + 1 == batches.size()) check_same_grads(*master, *model, 10 * tol);
    reference_opt.step();
    parallel_opt.step();
  }
  check_same_state(*master, *model, tol);
}

std::vector<int64_t> repeat(int64_t batch, int times) {
  return std::vector<int64_t>(static_cast<size_t>(times), batch);
}

}  // namespace

TEST_CASE("K SGD steps on 2, 3 and 4 devices equal one device, for each way to compute the loss",
          "[data_parallel][training][gpus:4]") {
  require_four_devices();
#if defined(__SANITIZE_ADDRESS__)
  const int n = GENERATE(2, 4);
#else
  const int n = GENERATE(2, 3, 4);
#endif
  const LossMode mode = GENERATE(LossMode::kGathered, LossMode::kReplicaMean, LossMode::kReplicaSum);
  manual_seed(11);
  expect_trains_like_one_device(std::make_shared<ConvNet>(), n, repeat(kBatch, kSteps), mode, 5, 100 + n);
}

TEST_CASE("uneven splits and batches smaller than the device count still equal one device",
          "[data_parallel][training][gpus:4]") {
  require_four_devices();
  auto state = std::make_shared<ProbeState>();
  manual_seed(12);
  auto model = std::make_shared<ProbedNet>(state);
  model->to(kCuda0);
  auto dp = std::make_shared<DataParallel>(twin(model), cuda_devices(4));
  Generator g(7);
  // The chunks each replica's forward saw: sizes differ by at most one, the first batch % n larger.
  const std::vector<std::pair<int64_t, std::vector<int64_t>>> splits = {
      {11, {3, 3, 3, 2}}, {2, {1, 1, 0, 0}}, {5, {2, 1, 1, 1}}, {1, {1, 0, 0, 0}}, {3, {1, 1, 1, 0}}};
  for (const auto& [batch, rows] : splits) {
    INFO("batch " << batch);
    state->clear_rows();
    const Tensor x = random_images(g, batch, 3, kSide, kSide);
    Tensor out = dp->forward(x);
    CHECK(dp->last_replica_count() == static_cast<size_t>(std::min<int64_t>(4, batch)));
    for (int k = 0; k < 4; ++k) {
      INFO("replica " << k);
      CHECK(state->rows[k] == rows[static_cast<size_t>(k)]);
    }
    NoGradGuard no_grad;
    check_close("output", out, model->forward(x.to(kCuda0)));
  }
  // Training through them, per-replica loss and gathered output.
  manual_seed(13);
  expect_trains_like_one_device(std::make_shared<ConvNet>(), 4, {11, 2, 1}, LossMode::kReplicaMean, 5, 21);
  manual_seed(14);
  expect_trains_like_one_device(std::make_shared<ConvNet>(), 4, {2, 11}, LossMode::kGathered, 5, 22);
  manual_seed(15);
  expect_trains_like_one_device(std::make_shared<ConvNet>(), 4, {3}, LossMode::kReplicaSum, 5, 23);
}

TEST_CASE("replicas queue on the caller's current streams: training on created streams equals one device",
          "[data_parallel][training][streams][gpus:4]") {
  require_four_devices();
  // A created stream current on every device (cuda:0 last, so that it is the current device).
  // Emulated streams never synchronise implicitly, and EMBER_EMU_DELAY holds their work back: a
  // replica's kernels on any other stream would race with the caller's gather, backward and step.
  std::vector<std::unique_ptr<cuda::StreamGuard>> guards;
  for (int d = 3; d >= 0; --d) guards.push_back(std::make_unique<cuda::StreamGuard>(cuda::Stream::create(d)));
  for (int d = 0; d < 4; ++d) REQUIRE_FALSE(cuda::current_stream(d).is_default());
  REQUIRE(cuda::current_device() == 0);
  for (LossMode mode : {LossMode::kGathered, LossMode::kReplicaMean}) {
    manual_seed(17);
    expect_trains_like_one_device(std::make_shared<ConvNet>(), 4, repeat(kBatch, kSteps), mode, 5, 18);
  }
  while (!guards.empty()) guards.pop_back();  // restored in reverse order
  CHECK(cuda::current_stream(0).is_default());
}

namespace {

// PyTorch's DataParallel with plain BatchNorm: replica k normalises chunk k with chunk k's own
// statistics, and the running statistics that survive are replica 0's. Written out on one device:
// each chunk through `model`, with its buffers put back after every chunk but the first.
Tensor chunkwise_forward(nn::Module& model, const Tensor& x, const std::vector<int64_t>& sizes) {
  std::vector<Tensor> outs;
  int64_t offset = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<Tensor> saved;
    if (k > 0) {
      for (const Tensor& b : model.buffers()) saved.push_back(b.clone());
    }
    outs.push_back(model.forward(x.narrow(0, offset, sizes[k]).to(kCuda0)));
    if (k > 0) {
      NoGradGuard no_grad;
      auto buffers = model.buffers();
      for (size_t i = 0; i < saved.size(); ++i) buffers[i].copy_(saved[i]);
    }
    offset += sizes[k];
  }
  return cat(outs, 0);
}

}  // namespace

TEST_CASE("plain BatchNorm: per-replica statistics, running statistics from replica 0 (as PyTorch)",
          "[data_parallel][batch_norm][gpus:4]") {
  require_four_devices();
  manual_seed(31);
  auto model = std::make_shared<BnNet>();
  model->to(kCuda0);
  auto fresh = twin(model);  // sees only replica 0's chunk
  auto master = twin(model);
  auto dp = std::make_shared<DataParallel>(master, cuda_devices(3));
  Generator g(32);
  const Tensor x = random_images(g, 10, 3, kSide, kSide);  // 4 + 3 + 3
  const Tensor y = random_labels(g, 10, 4);
  Tensor out = dp->forward(x);
  fresh->forward(x.narrow(0, 0, 4).to(kCuda0));
  check_close("running_mean", master->bn->running_mean, fresh->bn->running_mean);
  check_close("running_var", master->bn->running_var, fresh->bn->running_var);
  CHECK(master->bn->num_batches_tracked.item<int64_t>() == 1);
  // A whole-batch BatchNorm would give other running statistics: the check above can fail.
  auto whole = twin(model);
  whole->forward(x.to(kCuda0));
  CHECK(scaled_error(whole->bn->running_mean, fresh->bn->running_mean) > 1e-3);

  // Outputs and gradients are those of the chunks normalised separately, over a few SGD steps.
  const std::vector<int64_t> sizes = {4, 3, 3};
  check_close("output", out, chunkwise_forward(*model, x, sizes));
  optim::SGD reference_opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD parallel_opt(master->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step);
    const Tensor xs = random_images(g, 10, 3, kSide, kSide), ys = random_labels(g, 10, 4);
    reference_opt.zero_grad();
    parallel_opt.zero_grad();
    cross_entropy(chunkwise_forward(*model, xs, sizes), ys.to(kCuda0)).backward();
    dp->forward_loss(xs, ys, [](const Tensor& o, const Tensor& t) { return cross_entropy(o, t); }).loss.backward();
    check_same_grads(*master, *model, 1e-4);
    reference_opt.step();
    parallel_opt.step();
  }
  check_same_state(*master, *model);
}

TEST_CASE("SyncBatchNorm across replicas trains as BatchNorm on the whole batch on one device",
          "[data_parallel][batch_norm][gpus:4]") {
  require_four_devices();
#if defined(__SANITIZE_ADDRESS__)
  const int n = GENERATE(3);
#else
  const int n = GENERATE(3, 4);
#endif
  const LossMode mode = GENERATE(LossMode::kGathered, LossMode::kReplicaMean);
  manual_seed(41);
  auto model = std::make_shared<BnNet>();
  REQUIRE(parallel::convert_sync_batchnorm(*model) == 1);
  CHECK(model->bn->type_name() == "SyncBatchNorm");
  // Batches of 10 split unevenly (5+5 is not tried: 4+3+3 and 3+3+2+2).
  expect_trains_like_one_device(model, n, repeat(10, kSteps), mode, 4, 42);
}

TEST_CASE("smoke: an MLP with SyncBatchNorm1d trains like one device", "[data_parallel][batch_norm][gpus:4]") {
  require_four_devices();
  struct Mlp : nn::Cloneable<Mlp> {
    Mlp() : Cloneable("Mlp") { reset(); }
    void reset() override {
      fc1 = register_module("fc1", nn::Linear(6, 16));
      bn = register_module("bn", nn::BatchNorm1d(16));
      fc2 = register_module("fc2", nn::Linear(16, 3));
    }
    Tensor forward(const Tensor& x) override { return fc2(relu(bn(fc1(x)))); }
    nn::Linear fc1{nullptr}, fc2{nullptr};
    nn::BatchNorm1d bn{nullptr};
  };
  for (bool per_replica_loss : {false, true}) {
    INFO("per-replica loss " << per_replica_loss);
    manual_seed(3);
    auto single = std::make_shared<Mlp>();
    parallel::convert_sync_batchnorm(*single);
    single->to(kCuda0);
    auto master = twin(single);
    auto dp = std::make_shared<DataParallel>(master, cuda_devices(3));
    optim::SGD o1(single->parameters(), optim::SGDOptions(0.1));
    optim::SGD o2(master->parameters(), optim::SGDOptions(0.1));
    Generator g(5);
    for (int step = 0; step < 3; ++step) {
      const Tensor x = randn({6, 11}, {}, &g).t();  // [11, 6], transposed
      const Tensor y = randint(0, 3, {11}, TensorOptions(kInt64), &g);
      o1.zero_grad();
      o2.zero_grad();
      cross_entropy(single->forward(x.to(kCuda0)), y.to(kCuda0)).backward();
      if (per_replica_loss) {
        dp->forward_loss(x, y, [](const Tensor& o, const Tensor& t) { return cross_entropy(o, t); }).loss.backward();
      } else {
        cross_entropy(dp->forward(x), y.to(kCuda0)).backward();
      }
      o1.step();
      o2.step();
    }
    check_same_state(*master, *single);
  }
}

TEST_CASE("gradient accumulation over two batches before one step equals one device",
          "[data_parallel][training][gpus:4]") {
  require_four_devices();
  manual_seed(51);
  auto model = std::make_shared<ConvNet>();
  model->to(kCuda0);
  auto master = twin(model);
  auto dp = std::make_shared<DataParallel>(master, cuda_devices(3));
  optim::SGD reference_opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD parallel_opt(master->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Generator g(52);
  for (int step = 0; step < 2; ++step) {
    reference_opt.zero_grad();
    parallel_opt.zero_grad();
    for (int64_t batch : {7, 5}) {  // 3+2+2, then 2+2+1: a different split each time
      const Batch b = random_batch(g, batch, 5, LossMode::kGathered);
      reference_loss(*model, b, LossMode::kGathered).backward();
      parallel_loss(*dp, b, step == 0 ? LossMode::kGathered : LossMode::kReplicaMean).backward();
    }
    check_same_grads(*master, *model, 1e-4);
    reference_opt.step();
    parallel_opt.step();
  }
  check_same_state(*master, *model);
}

TEST_CASE("backward with retain_graph twice doubles the gradients, as on one device",
          "[data_parallel][training][gpus:4]") {
  require_four_devices();
  manual_seed(61);
  auto model = std::make_shared<ConvNet>();
  model->to(kCuda0);
  auto master = twin(model);
  auto dp = std::make_shared<DataParallel>(master, cuda_devices(4));
  Generator g(62);
  const Batch b = random_batch(g, 9, 5, LossMode::kGathered);
  const Tensor x = b.x.clone().requires_grad_(true);
  const Tensor x_ref = b.x.clone().requires_grad_(true);
  for (bool per_replica : {false, true}) {
    INFO("per-replica loss " << per_replica);
    model->zero_grad();
    master->zero_grad();
    x.mutable_grad() = Tensor();
    x_ref.mutable_grad() = Tensor();
    Tensor expected = cross_entropy(model->forward(x_ref.to(kCuda0)), b.y.to(kCuda0));
    expected.backward();
    Tensor actual =
        per_replica
            ? dp->forward_loss(x, b.y, [](const Tensor& o, const Tensor& t) { return cross_entropy(o, t); }).loss
            : cross_entropy(dp->forward(x), b.y.to(kCuda0));
    actual.backward(Tensor(), /*retain_graph=*/true);
    check_same_grads(*master, *model, 1e-4);
    check_close("input grad after one backward", x.grad(), x_ref.grad(), 1e-4);
    actual.backward();
    // Twice the single-device gradients: the second pass adds as much again.
    for (auto& p : model->parameters()) p.mutable_grad() = p.grad() * 2.0;
    check_same_grads(*master, *model, 1e-4);
    check_close("input grad after two", x.grad(), x_ref.grad() * 2.0, 1e-4);
  }
}
