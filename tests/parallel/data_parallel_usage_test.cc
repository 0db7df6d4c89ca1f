// DataParallel's inputs, outputs and state against the same model on cuda:0 with the whole batch:
// non-contiguous inputs, splitting along dim 1, inputs on the CPU or on another device than
// device_ids[0], output devices, inputs that need a gradient, evaluation mode and NoGradGuard,
// and state_dict without a "module." prefix.
#include <catch2/catch.hpp>

#include <set>

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

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kSide = 6;  // the smallest ConvNet takes
#else
constexpr int64_t kSide = 9;
#endif

Tensor ce(const Tensor& out, const Tensor& target) { return cross_entropy(out, target); }

// A random loss weight per output element: every output element gets its own gradient.
Tensor weighted_sum(const Tensor& out, const Tensor& weights) { return (out * weights.to(out.device())).sum(); }

// The model and its DataParallel twin on `n` devices (device_ids[0] = cuda:0).
template <typename M>
std::pair<std::shared_ptr<M>, std::shared_ptr<DataParallel>> model_and_parallel(
    std::shared_ptr<M> model, int n, std::optional<Device> output_device = std::nullopt, int64_t dim = 0) {
  model->to(kCuda0);
  auto dp = std::make_shared<DataParallel>(twin(model), cuda_devices(n), output_device, dim);
  return {model, dp};
}

}  // namespace

TEST_CASE("non-contiguous inputs (transposed, strided, channels-last) match one device",
          "[data_parallel][inputs][gpus:4]") {
  require_four_devices();
  manual_seed(71);
  auto [model, dp] = model_and_parallel(std::make_shared<ConvNet>(), 4);
  Generator g(72);
  std::vector<std::pair<std::string, Tensor>> inputs = {
      {"transposed H/W", randn({7, 3, kSide + 2, kSide}, {}, &g).transpose(2, 3)},
      {"every other column", randn({10, 3, kSide, 2 * kSide + 1}, {}, &g).slice(3, 0, 2 * kSide + 1, 2)},
      {"every other sample", randn({13, 3, kSide, kSide}, {}, &g).slice(0, 1, 13, 2)},
      {"channels-last", random_images(g, 9, 3, kSide, kSide)},
  };
  for (auto& [name, x] : inputs) {
    INFO(name << ", shape " << shape_str(x.sizes()));
    REQUIRE_FALSE(x.is_contiguous());
    const Tensor w = randn({x.size(0), 5}, {}, &g);
    model->zero_grad();
    dp->module()->zero_grad();
    Tensor expected = model->forward(x.to(kCuda0));
    weighted_sum(expected, w).backward();
    Tensor actual = dp->forward(x);
    REQUIRE(actual.device() == kCuda0);
    check_close("output", actual, expected);
    weighted_sum(actual, w).backward();
    check_same_grads(*dp->module(), *model);
  }
}

namespace {

// A sequence model on [T, B, F]: Linear layers on the last dimension, and a mixing step across
// time (each step sees the sequence's mean), so that only a split along B gives the whole batch's
// values.
struct SequenceNet : nn::Cloneable<SequenceNet> {
  SequenceNet() : Cloneable("SequenceNet") { reset(); }
  void reset() override {
    in = register_module("in", nn::Linear(6, 10));
    out = register_module("out", nn::Linear(10, 4));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = in(x);
    return out((h + h.mean({0}, /*keepdim=*/true)).tanh());
  }
  nn::Linear in{nullptr}, out{nullptr};
};

}  // namespace

TEST_CASE("dim = 1 splits [T, B, F] along B, for forward and forward_loss", "[data_parallel][inputs][gpus:4]") {
  require_four_devices();
  manual_seed(81);
  auto model = std::make_shared<SequenceNet>();
  model->to(kCuda0);
  auto master = twin(model);
  auto dp = std::make_shared<DataParallel>(master, cuda_devices(3), std::nullopt, /*dim=*/1);
  CHECK(dp->dim() == 1);
  Generator g(82);
  const int64_t T = 5, B = 7;                                 // 3 + 2 + 2 along B
  const Tensor x = randn({B, T, 6}, {}, &g).transpose(0, 1);  // [T, B, F], non-contiguous
  const Tensor target = randn({T, B, 4}, {}, &g);
  Tensor expected = model->forward(x.to(kCuda0));
  Tensor actual = dp->forward(x);
  REQUIRE(actual.sizes() == Shape{T, B, 4});
  check_close("output", actual, expected);
  mse_loss(expected, target.to(kCuda0), Reduction::Sum).backward();
  mse_loss(actual, target.to(kCuda0), Reduction::Sum).backward();
  check_same_grads(*master, *model);
  // Split along dim 0 (T) instead, the outputs have the same shape but other values: the check
  // above can fail.
  auto wrong = std::make_shared<DataParallel>(twin(model), cuda_devices(3), std::nullopt, 0);
  {
    NoGradGuard no_grad;
    CHECK(scaled_error(wrong->forward(x), expected) > 1e-3);
  }

  // The target [T, B, 4] is split along dim 1 like the input.
  model->zero_grad();
  master->zero_grad();
  Tensor expected_loss = mse_loss(model->forward(x.to(kCuda0)), target.to(kCuda0));
  expected_loss.backward();
  Tensor actual_loss =
      dp->forward_loss(x, target, [](const Tensor& o, const Tensor& t) { return mse_loss(o, t); }).loss;
  check_close("loss", actual_loss, expected_loss);
  actual_loss.backward();
  check_same_grads(*master, *model);
  CHECK(dp->last_replica_count() == 3);
  // A target that does not match the input along dim 1 is an error naming both shapes.
  CHECK_THROWS_WITH(dp->forward_loss(x, target.narrow(1, 0, 6), ce),
                    Catch::Contains("[5, 7, 6]") && Catch::Contains("[5, 6, 4]"));
}

TEST_CASE("inputs on the CPU or on another device, and each output device, match one device",
          "[data_parallel][inputs][gpus:4]") {
  require_four_devices();
  manual_seed(91);
  auto model = std::make_shared<ConvNet>();
  model->to(kCuda0);
  Generator g(92);
  const Tensor x = random_images(g, 11, 3, kSide, kSide);
  const Tensor w = randn({11, 5}, {}, &g);
  Tensor expected = model->forward(x.to(kCuda0));
  weighted_sum(expected, w).backward();
  struct Case {
    Device input;
    std::optional<Device> output;
    Device expected_output;
  };
  const std::vector<Case> cases = {
      {Device(kCPU), std::nullopt, kCuda0},
      {Device::cuda(1), std::nullopt, kCuda0},  // not device_ids[0]
      {Device::cuda(3), Device::cuda(2), Device::cuda(2)},
      {Device::cuda(0), Device(kCPU), Device(kCPU)},
  };
  for (const Case& c : cases) {
    INFO("input on " << c.input << ", output_device " << (c.output ? c.output->str() : "unset"));
    auto dp = std::make_shared<DataParallel>(twin(model), cuda_devices(4), c.output);
    CHECK(dp->output_device() == c.expected_output);
    const Tensor xi = x.to(c.input);
    CHECK(xi.device() == c.input);
    Tensor actual = dp->forward(xi);
    REQUIRE(actual.device() == c.expected_output);
    check_close("output", actual, expected);
    weighted_sum(actual, w).backward();
    check_same_grads(*dp->module(), *model);
    // The per-replica loss too (its result is on the output device).
    const Tensor y = random_labels(g, 11, 5);
    Tensor loss = dp->forward_loss(xi, y.to(c.input), ce).loss;
    CHECK(loss.device() == c.expected_output);
    NoGradGuard no_grad;
    check_close("loss", loss, ce(model->forward(x.to(kCuda0)), y.to(kCuda0)));
  }
}

TEST_CASE("an input that requires grad gets the gradient one device gives it", "[data_parallel][inputs][gpus:4]") {
  require_four_devices();
  manual_seed(101);
  auto model = std::make_shared<ConvNet>();
  model->to(kCuda0);
  Generator g(102);
  const Tensor y = random_labels(g, 10, 5);
  for (Device where : {Device(kCPU), Device::cuda(2)}) {
    for (bool per_replica : {false, true}) {
      INFO("input on " << where << (per_replica ? ", forward_loss" : ", forward"));
      auto dp = std::make_shared<DataParallel>(twin(model), cuda_devices(3));  // 4 + 3 + 3
      Tensor x = random_images(g, 10, 3, kSide, kSide).to(where);
      x.requires_grad_(true);
      Tensor x_ref = x.detach().clone();
      x_ref.requires_grad_(true);
      model->zero_grad();
      ce(model->forward(x_ref.to(kCuda0)), y.to(kCuda0)).backward();
      Tensor loss = per_replica ? dp->forward_loss(x, y, ce).loss : ce(dp->forward(x), y.to(kCuda0));
      CHECK(loss.requires_grad());
      loss.backward();
      REQUIRE(x.grad().defined());
      CHECK(x.grad().device() == where);
      CHECK(x.grad().sizes() == x.sizes());
      check_close("input grad", x.grad(), x_ref.grad());
      check_same_grads(*dp->module(), *model);
    }
  }
  // An input that needs no gradient gets none, and the parameters still get theirs.
  auto dp = std::make_shared<DataParallel>(twin(model), cuda_devices(3));
  Tensor x = random_images(g, 10, 3, kSide, kSide);
  ce(dp->forward(x), y.to(kCuda0)).backward();
  CHECK_FALSE(x.grad().defined());
  for (auto& p : dp->parameters()) CHECK(p.grad().defined());
}

TEST_CASE("evaluation mode and NoGradGuard forwards equal one device's", "[data_parallel][eval][gpus:4]") {
  require_four_devices();
  manual_seed(111);
  auto model = std::make_shared<BnNet>();
  model->to(kCuda0);
  auto master = twin(model);
  auto dp = std::make_shared<DataParallel>(master, cuda_devices(4));
  Generator g(112);
  // Some training first, so that the running statistics are not their initial values.
  for (int step = 0; step < 2; ++step) {
    const Tensor x = random_images(g, 8, 3, kSide, kSide);
    model->forward(x.narrow(0, 0, 2).to(kCuda0));  // replica 0's chunk: the statistics DataParallel keeps
    dp->forward(x);
  }
  check_same_state(*master, *model);
  const Tensor x = random_images(g, 13, 3, kSide, kSide);
  Tensor training_out = dp->forward(x);  // also moves the running statistics once more
  model->forward(x.narrow(0, 0, 4).to(kCuda0));

  dp->eval();
  CHECK_FALSE(master->is_training());
  CHECK_FALSE(master->bn->is_training());
  model->eval();
  const auto stats_before = master->bn->running_mean.clone();
  Tensor expected;
  {
    NoGradGuard no_grad;
    expected = model->forward(x.to(kCuda0));
    Tensor actual = dp->forward(x);
    CHECK_FALSE(actual.requires_grad());
    check_close("eval output under NoGradGuard", actual, expected);
  }
  // Evaluation with gradients on: the same values, and a graph to the parameters.
  Tensor actual = dp->forward(x);
  CHECK(actual.requires_grad());
  check_close("eval output", actual, expected);
  // Whole-batch running statistics differ from each chunk's own: the comparisons can fail.
  CHECK(scaled_error(training_out, expected) > 1e-3);
  // Evaluation leaves the running statistics alone, on the master and through it on the replicas.
  check_close("running_mean after eval", master->bn->running_mean, stats_before, 0.0);
  for (size_t k = 1; k < 4; ++k) CHECK_FALSE(dp->replica(k)->is_training());

  // Back to training: the replicas follow the master's flags at the next forward.
  dp->train();
  CHECK(master->bn->is_training());
  dp->forward(x.narrow(0, 0, 8));
  for (size_t k = 1; k < 4; ++k) CHECK(dp->replica(k)->is_training());
  CHECK(scaled_error(master->bn->running_mean, stats_before) > 1e-4);

  // NoGradGuard in training mode: no graph, the values of one device, and every replica ran with
  // gradients off (the caller's grad mode reaches the replicas' threads).
  auto probe = std::make_shared<ProbeState>();
  auto conv = std::make_shared<ProbedNet>(probe);
  conv->to(kCuda0);
  auto dp_conv = std::make_shared<DataParallel>(twin(conv), cuda_devices(3));
  for (bool grad : {false, true}) {
    INFO("grad mode " << grad);
    probe->clear_rows();
    Tensor out, loss;
    {
      EnableGradGuard mode(grad);
      out = dp_conv->forward(x);
      loss = dp_conv->forward_loss(x, random_labels(g, 13, 5), ce).loss;
    }
    CHECK(out.requires_grad() == grad);
    CHECK(loss.requires_grad() == grad);
    for (int k = 0; k < 3; ++k) CHECK(probe->grad_mode[k] == (grad ? 1 : 0));
    NoGradGuard no_grad;
    check_close("output", out, conv->forward(x.to(kCuda0)));
  }
}

TEST_CASE("state_dict has the bare module's keys and loads across DataParallel, bare and CPU models",
          "[data_parallel][state][gpus:4]") {
  require_four_devices();
  manual_seed(121);
  auto model = std::make_shared<BnNet>();
  parallel::convert_sync_batchnorm(*model);
  model->to(kCuda0);
  auto dp = std::make_shared<DataParallel>(twin(model), cuda_devices(3));
  // Train a little, so that the state is not the initial one.
  optim::SGD opt(dp->parameters(), optim::SGDOptions(0.1));
  Generator g(122);
  for (int step = 0; step < 2; ++step) {
    opt.zero_grad();
    dp->forward_loss(random_images(g, 9, 3, kSide, kSide), random_labels(g, 9, 4), ce).loss.backward();
    opt.step();
  }
  CHECK(dp->parameters().size() == model->parameters().size());  // no replica's parameters listed

  const NamedTensors dp_state = dp->state_dict();
  const NamedTensors bare_state = model->state_dict();
  REQUIRE(dp_state.size() == bare_state.size());
  for (size_t i = 0; i < dp_state.size(); ++i) {
    CHECK(dp_state[i].first == bare_state[i].first);
    CHECK(dp_state[i].first.rfind("module.", 0) == std::string::npos);
  }
  std::set<std::string> keys;
  for (auto& [name, t] : dp_state) keys.insert(name);
  CHECK(keys.count("bn.running_mean") == 1);
  CHECK(keys.count("conv.weight") == 1);
  auto names = [](const std::vector<std::pair<std::string, Tensor>>& v) {
    std::vector<std::string> out;
    for (auto& [n, t] : v) out.push_back(n);
    return out;
  };
  CHECK(names(dp->named_parameters()) == names(model->named_parameters()));
  CHECK(names(dp->named_buffers()) == names(model->named_buffers()));

  // Into a bare model on the CPU: identical values.
  auto cpu = std::make_shared<BnNet>();
  nn::LoadResult r = cpu->load_state_dict(dp_state);
  CHECK(r.missing_keys.empty());
  CHECK(r.unexpected_keys.empty());
  check_same_state(*cpu, *dp->module(), 0.0);
  CHECK(cpu->conv->weight.device() == Device(kCPU));

  // Into the DataParallel: the master changes, and the next forward runs the new values on every
  // replica (the CPU model is the reference).
  auto other = std::make_shared<BnNet>();  // other weights (the seed moved on)
  CHECK(scaled_error(other->conv->weight, cpu->conv->weight) > 1e-2);
  r = dp->load_state_dict(other->state_dict());
  CHECK(r.missing_keys.empty());
  CHECK(dp->module()->find_child("conv")->find_parameter("weight")->device() == kCuda0);
  check_same_state(*dp->module(), *other, 0.0);
  dp->eval();
  other->eval();
  other->to(kCuda0);
  const Tensor x = random_images(g, 7, 3, kSide, kSide);
  NoGradGuard no_grad;
  check_close("output after load", dp->forward(x), other->forward(x.to(kCuda0)));
  for (size_t k = 1; k < 3; ++k) {
    auto replica_state = dp->replica(k)->state_dict();
    CHECK(replica_state.front().second.device() == Device::cuda(static_cast<int>(k)));
    check_close("replica conv.weight", replica_state.front().second, other->conv->weight, 0.0);
  }
}
