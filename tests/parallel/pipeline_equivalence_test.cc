// Pipeline equals the un-pipelined model: outputs, losses and gradients for m = 1, m < p, m >> p
// and an uneven last micro-batch, under every schedule of pipeline_cases.h (GPipe, 1F1B,
// interleaved), with and without recomputation, on emulated devices and with a stage on the CPU;
// K training steps; BatchNorm per micro-batch and deferred; dropout replayed by recomputation;
// checkpoints; kAuto's choice; errors.
//
// Tolerance: a stage's gradients are sums over micro-batches (in the schedule's fixed order), the
// reference's over the whole batch, so they agree to rounding: 1e-5 relative to the gradient's
// largest element, as DataParallel's tests.
#include <catch2/catch.hpp>

#include <atomic>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"
#include "parallel/pipeline.h"
#include "tests/parallel/data_parallel_helpers.h"
#include "tests/parallel/pipeline_cases.h"

using namespace ember;
using namespace ember::testing;
using Catch::Contains;
using parallel::LossReduction;
using parallel::Pipeline;
using parallel::PipelineOptions;
using parallel::Schedule;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kSide = 4;
#else
constexpr int64_t kSide = 6;
#endif
constexpr int64_t kClasses = 5;

Tensor ce(const Tensor& out, const Tensor& target) { return cross_entropy(out, target); }

// Eight layers, no batch statistics: the whole batch and its micro-batches give the same values.
nn::Sequential plain_net() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 6, 3).padding(1)), nn::ReLU(),
                        nn::Conv2d(nn::Conv2dOptions(6, 8, 3).stride(2).padding(1)), nn::GELU(),
                        nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(8, 12), nn::Linear(12, kClasses));
}

nn::Sequential bn_net() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 6, 3).bias(false)), nn::BatchNorm2d(6), nn::ReLU(),
                        nn::Conv2d(nn::Conv2dOptions(6, 6, 3).padding(1).bias(false)), nn::BatchNorm2d(6), nn::ReLU(),
                        nn::AdaptiveAvgPool2d(1), nn::Flatten(), nn::Linear(6, kClasses));
}

nn::Sequential copy_of(const nn::Sequential& seq, Device device) {
  return nn::Sequential(std::dynamic_pointer_cast<nn::SequentialImpl>(seq->clone(device)));
}

std::vector<Device> cuda4() { return {kCuda0, Device::cuda(1), Device::cuda(2), Device::cuda(3)}; }
std::vector<Device> with_cpu() { return {Device(kCPU), kCuda0, Device::cuda(1)}; }

struct Grads {
  Tensor loss, output, input_grad;
  std::vector<Tensor> params;
};

Grads reference_grads(nn::Sequential model, const Tensor& x, const Tensor& y) {
  model->zero_grad();
  Tensor xin = x.detach().clone().requires_grad_(true);
  Tensor out = model->forward(xin);
  Tensor loss = ce(out, y);
  loss.backward();
  Grads g{loss.detach(), out.detach(), xin.grad(), {}};
  for (const Tensor& p : model->parameters()) g.params.push_back(p.grad());
  return g;
}

// A train_step's loss and the parameters' gradients, on the host.
Grads step_grads(const parallel::PipelineStep& step, const Pipeline& pipe) {
  Grads got{step.loss.to(kCPU), {}, {}, {}};
  for (const Tensor& prm : pipe.parameters()) got.params.push_back(prm.grad().to(kCPU));
  return got;
}

void check_grads(const std::string& what, const Grads& got, const Grads& want, bool outputs) {
  INFO(what);
  check_close("loss", got.loss, want.loss);
  if (outputs) check_close("output", got.output, want.output);
  if (want.input_grad.defined() && got.input_grad.defined()) check_close("input grad", got.input_grad, want.input_grad);
  REQUIRE(got.params.size() == want.params.size());
  for (size_t i = 0; i < got.params.size(); ++i) {
    INFO("parameter " << i);
    REQUIRE(got.params[i].defined());
    check_close("grad", got.params[i], want.params[i]);
  }
}

}  // namespace

TEST_CASE("outputs and gradients equal the un-pipelined model's for every m, schedule and recomputation",
          "[pipeline][equivalence][gpus:4]") {
  require_four_devices();
  manual_seed(301);
  const nn::Sequential base = plain_net();
  Generator g(302);
  const Tensor x = random_images(g, 11, 3, kSide, kSide), y = random_labels(g, 11, kClasses);
  const Grads want = reference_grads(copy_of(base, Device(kCPU)), x, y);
#if defined(__SANITIZE_ADDRESS__)
  // ASan makes the emulated kernels ~15x slower: the mixed CPU + GPU split only (it has the most
  // kinds of transfer); the default build runs both.
  for (bool cpu_stage : {true}) {
#else
  for (bool cpu_stage : {false, true}) {
#endif
    const std::vector<Device> devices = cpu_stage ? with_cpu() : cuda4();
    const int64_t p = static_cast<int64_t>(devices.size());
    for (int64_t m : {int64_t(1), p - 1, int64_t(9)}) {  // 11 in 9: two of 2, seven of 1
      for (const ScheduleCase& c : schedule_cases()) {
        for (bool checkpoint : {false, true}) {
          const std::string what = std::string(cpu_stage ? "cpu+cuda" : "cuda x4") + ", m=" + std::to_string(m) + ", " +
                                   c.name() + (checkpoint ? ", recompute" : "");
          PipelineOptions options = c.options();
          options.checkpoint = checkpoint;
          auto pipe = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), devices, m, c.schedule, options);
          // train_step: the schedule's own forwards and backwards.
          pipe->zero_grad();
          parallel::PipelineStep step = pipe->train_step(x, y, ce);
          check_grads(what + ", train_step", step_grads(step, *pipe), want, false);
          // forward(): GPipe's forward with an autograd result, the input's gradient too.
          pipe->zero_grad();
          Tensor xin = x.detach().clone().requires_grad_(true);
          Tensor out = pipe->forward(xin);
          CHECK(out.device() == devices.back());
          Tensor loss = ce(out, y.to(devices.back()));
          loss.backward();
          Grads via_forward{loss.detach().to(kCPU), out.detach().to(kCPU), xin.grad(), {}};
          for (const Tensor& prm : pipe->parameters()) via_forward.params.push_back(prm.grad().to(kCPU));
          check_grads(what + ", forward + backward", via_forward, want, true);
          // The schedule ran every micro-batch's forward and backward on every stage once.
          CHECK(pipe->num_stages() == p * c.virtual_stages);
          CHECK(pipe->last_events().size() == static_cast<size_t>(pipe->num_stages() * std::min<int64_t>(m, 11)));
        }
      }
    }
  }
}

TEST_CASE("K SGD steps of a pipeline equal K steps of the model on one device", "[pipeline][equivalence][gpus:4]") {
  require_four_devices();
  manual_seed(311);
  const nn::Sequential base = plain_net();
  for (const ScheduleCase& c : schedule_cases()) {
    INFO(c.name());
    nn::Sequential reference = copy_of(base, kCuda0);
    auto pipe = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), cuda4(), 4, c.schedule, c.options());
    CHECK(pipe->balance().size() == static_cast<size_t>(4 * c.virtual_stages));
    optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    optim::SGD pipe_opt(pipe->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    Generator g(312);
    for (int k = 0; k < 3; ++k) {
      const Tensor x = random_images(g, 10, 3, kSide, kSide), y = random_labels(g, 10, kClasses);
      ref_opt.zero_grad();
      ce(reference->forward(x.to(kCuda0)), y.to(kCuda0)).backward();
      ref_opt.step();
      pipe_opt.zero_grad();
      pipe->train_step(x, y, ce);
      pipe_opt.step();
    }
    // Each parameter stayed on its stage's device (stage s on device s % 4), and the values match.
    for (int64_t s = 0; s < pipe->num_stages(); ++s)
      for (const Tensor& prm : pipe->stage(s)->parameters()) CHECK(prm.device() == pipe->devices()[s % 4]);
    const auto want = reference->state_dict();
    const auto got = pipe->state_dict();
    REQUIRE(want.size() == got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO(want[i].first);
      CHECK(got[i].first == want[i].first);
      check_close("state", got[i].second.to(kCuda0), want[i].second, 1e-5);
    }
  }
}

TEST_CASE("BatchNorm: per micro-batch by default, or one running-statistics update per mini-batch",
          "[pipeline][batch_norm][gpus:4]") {
  require_four_devices();
  manual_seed(321);
  const nn::Sequential base = bn_net();
  Generator g(322);
  const Tensor x = random_images(g, 12, 3, kSide, kSide), y = random_labels(g, 12, kClasses);
  const int64_t m = 3;
  // Per micro-batch: the reference runs the model on each micro-batch in turn (statistics and
  // running-statistics updates per micro-batch), the loss weighted by each one's share.
  nn::Sequential reference = copy_of(base, Device(kCPU));
  reference->zero_grad();
  Tensor ref_loss;
  const std::vector<Tensor> xs = x.split(4), ys = y.split(4);
  for (size_t i = 0; i < xs.size(); ++i) {
    Tensor l = ce(reference->forward(xs[i]), ys[i]) * (1.0 / m);
    l.backward();
    ref_loss = ref_loss.defined() ? ref_loss + l.detach() : l.detach();
  }
  for (const ScheduleCase& c : schedule_cases()) {
    for (bool checkpoint : {false, true}) {
      INFO(c.name() << (checkpoint ? ", recompute" : ", no recompute"));
      PipelineOptions options = c.options();
      options.checkpoint = checkpoint;
      auto pipe = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), with_cpu(), m, c.schedule, options);
      pipe->zero_grad();
      check_close("loss", pipe->train_step(x, y, ce).loss.to(kCPU), ref_loss);
      check_same_state(*pipe->sequential(), *reference);  // running statistics counted once per micro-batch
      check_same_grads(*pipe->sequential(), *reference, 1e-5);
    }
  }
  // Deferred: the running statistics move once per mini-batch, by the statistics of all the
  // inputs the layer saw. The first BatchNorm sees the same inputs as in the un-pipelined model's
  // forward on the whole batch, so its running statistics must equal that forward's (the later
  // one sees inputs normalised per micro-batch, so only its count is checked).
  nn::Sequential whole = copy_of(base, Device(kCPU));
  {
    NoGradGuard no_grad;
    whole->forward(x);
  }
  for (const ScheduleCase& c : schedule_cases()) {
    for (bool checkpoint : {false, true}) {
      INFO(c.name() << (checkpoint ? ", deferred, recompute" : ", deferred"));
      PipelineOptions options = c.options();
      options.deferred_batch_norm = true;
      options.checkpoint = checkpoint;
      auto pipe = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), cuda4(), m, c.schedule, options);
      pipe->train_step(x, y, ce);
      const auto want = whole->named_buffers();
      const auto got = pipe->named_buffers();
      REQUIRE(want.size() == got.size());
      for (size_t i = 0; i < want.size(); ++i) {
        INFO(want[i].first);
        REQUIRE(got[i].first == want[i].first);
        if (got[i].first.rfind("1.", 0) == 0) check_close("buffer", got[i].second.to(kCPU), want[i].second, 1e-5);
        if (got[i].first.find("num_batches_tracked") != std::string::npos) CHECK(got[i].second.item<int64_t>() == 1);
      }
    }
  }
  // One micro-batch: deferring changes nothing.
  PipelineOptions deferred;
  deferred.deferred_batch_norm = true;
  auto one = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), with_cpu(), 1, Schedule::k1F1B, deferred);
  auto plain = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), with_cpu(), 1, Schedule::k1F1B);
  one->train_step(x, y, ce);
  plain->train_step(x, y, ce);
  check_same_state(*one->sequential(), *plain->sequential(), 1e-6);
}

namespace {

// Dropout between linear layers: recomputation must replay the same mask. Eight layers, so that
// four devices hold two chunks each.
nn::Sequential dropout_net() {
  return nn::Sequential(nn::Linear(7, 16), nn::Dropout(0.5), nn::ReLU(), nn::Linear(16, 16), nn::Dropout(0.3),
                        nn::ReLU(), nn::Linear(16, 16), nn::Linear(16, kClasses));
}

}  // namespace

TEST_CASE("dropout: recomputation replays the same random numbers; a seed makes runs repeat",
          "[pipeline][recompute][gpus:4]") {
  require_four_devices();
  manual_seed(331);
  const nn::Sequential base = dropout_net();
  Generator g(332);
  const Tensor x = randn({13, 7}, {}, &g), y = random_labels(g, 13, kClasses);
  auto run = [&](bool checkpoint, const ScheduleCase& c) {
    PipelineOptions options = c.options();
    options.checkpoint = checkpoint;
    auto pipe = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), cuda4(), 5, c.schedule, options);
    manual_seed(333);
    parallel::PipelineStep step = pipe->train_step(x, y, ce);
    return step_grads(step, *pipe);
  };
  // A stage's random numbers depend on the stage and the micro-batch only, so every schedule with
  // the same stages draws the same; interleaved's stages are other parts of the model.
  const Grads plain = run(false, schedule_cases()[0]);
  for (const ScheduleCase& c : schedule_cases()) {
    const Grads own = c.virtual_stages == 1 ? plain : run(false, c);
    check_grads("recomputed, " + c.name(), run(true, c), own, false);
    check_grads("again, " + c.name(), run(false, c), own, false);
  }
  // Dropout did drop: the loss differs from evaluation mode's.
  auto eval_pipe = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), cuda4(), 5);
  eval_pipe->eval();
  NoGradGuard no_grad;
  const Tensor eval_loss = ce(eval_pipe->forward(x), y.to(Device::cuda(3))).to(kCPU);
  CHECK(std::abs(eval_loss.item<double>() - plain.loss.item<double>()) > 1e-4);
}

TEST_CASE("evaluation: forward without gradients pipelines the forwards and equals the model",
          "[pipeline][eval][gpus:4]") {
  require_four_devices();
  manual_seed(341);
  const nn::Sequential base = bn_net();
  nn::Sequential reference = copy_of(base, Device(kCPU));
  reference->eval();
  auto pipe = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), with_cpu(), 4);
  pipe->eval();
  Generator g(342);
  const Tensor x = random_images(g, 9, 3, kSide, kSide);
  NoGradGuard no_grad;
  const Tensor out = pipe->forward(x);
  CHECK_FALSE(out.requires_grad());
  check_close("eval output", out.to(kCPU), reference->forward(x));
  CHECK(pipe->last_events().size() == 3 * 4);
  for (const auto& e : pipe->last_events()) CHECK_FALSE(e.backward);
  // With virtual stages the forwards go round the devices twice.
  PipelineOptions two_chunks;
  two_chunks.virtual_stages = 2;
  auto interleaved =
      std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), with_cpu(), 4, Schedule::kInterleaved1F1B, two_chunks);
  interleaved->eval();
  check_close("interleaved eval output", interleaved->forward(x).to(kCPU), reference->forward(x));
  CHECK(interleaved->last_events().size() == 6 * 4);
}

TEST_CASE("state_dict: the bare Sequential's keys, loading across a pipeline and one device",
          "[pipeline][checkpoint][gpus:4]") {
  require_four_devices();
  manual_seed(351);
  const nn::Sequential base = bn_net();
  auto pipe = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), with_cpu(), 2);
  const auto bare = base->state_dict();
  const auto state = pipe->state_dict();
  REQUIRE(bare.size() == state.size());
  for (size_t i = 0; i < bare.size(); ++i) CHECK(state[i].first == bare[i].first);
  // Into the pipeline: each tensor lands on its stage's device.
  nn::Sequential other = bn_net();
  pipe->load_state_dict(other->state_dict());
  for (int64_t s = 0; s < pipe->num_stages(); ++s)
    for (const Tensor& prm : pipe->stage(s)->parameters()) CHECK(prm.device() == pipe->devices()[s]);
  check_same_state(*pipe->sequential(), *other, 0.0);
  // Out of it, into a model on one device.
  nn::Sequential single = copy_of(base, Device::cuda(2));
  single->load_state_dict(pipe->state_dict());
  check_same_state(*single, *other, 0.0);
}

namespace {

// Fails on purpose in the forward of micro-batch `fail_forward_at`, or in the backward.
struct FailState {
  std::atomic<int64_t> seen{0};
  std::atomic<int64_t> fail_forward_at{-1};
  std::atomic<bool> fail_backward{false};
};

struct Failing : nn::Cloneable<Failing> {
  explicit Failing(std::shared_ptr<FailState> state) : Cloneable("Failing"), state(std::move(state)) {}
  void reset() override {}
  Tensor forward(const Tensor& x) override {
    const int64_t n = state->seen++;
    EMBER_CHECK(n != state->fail_forward_at, "Failing: failing on purpose in the forward");
    if (!x.requires_grad()) return x;
    Tensor y = x * 1.0;
    const bool fail = state->fail_backward;
    y.register_hook([fail](const Tensor&) -> Tensor {
      if (fail) throw Error("Failing: failing on purpose in the backward");
      return Tensor();
    });
    return y;
  }
  std::shared_ptr<FailState> state;
};

}  // namespace

TEST_CASE("a stage that fails names the stage and its device; the others do not hang", "[pipeline][errors][gpus:4]") {
  require_four_devices();
  manual_seed(361);
  auto failing = std::make_shared<FailState>();
  nn::Sequential seq(nn::Linear(4, 6), nn::ReLU(), nn::Linear(6, 6));
  seq->push_back(std::make_shared<Failing>(failing));
  seq->push_back(nn::Linear(6, kClasses));
  Generator g(362);
  const Tensor x = randn({8, 4}, {}, &g), y = random_labels(g, 8, kClasses);
  PipelineOptions options;
  options.balance = {1, 1, 2, 1};  // the failing layer on stage 2 (cuda:2)
  Watchdog watchdog("a failing pipeline stage", 120);
  std::shared_ptr<Pipeline> pipe;
  for (const ScheduleCase& c : schedule_cases()) {
    INFO(c.name());
    // Two chunks per device on two devices: the failing stage 2 is device 0's second chunk.
    const bool chunked = c.virtual_stages == 2;
    PipelineOptions o = c.options();
    o.balance = options.balance;
    pipe = std::make_shared<Pipeline>(seq, chunked ? cuda_devices(2) : cuda4(), 4, c.schedule, o);
    const std::string where = chunked ? "Pipeline: stage 2 on cuda:0 failed" : "Pipeline: stage 2 on cuda:2 failed";
    failing->seen = 0;
    failing->fail_forward_at = 2;
    CHECK_THROWS_WITH(pipe->train_step(x, y, ce), Contains(where) && Contains("failing on purpose in the forward"));
    failing->fail_forward_at = -1;
    failing->fail_backward = true;
    CHECK_THROWS_WITH(pipe->train_step(x, y, ce), Contains(where) && Contains("failing on purpose in the backward"));
    failing->fail_backward = false;
  }
  // The same pipeline trains afterwards.
  pipe->zero_grad();
  CHECK(std::isfinite(pipe->train_step(x, y, ce).loss.item<double>()));
}

TEST_CASE("construction and call errors name what is wrong", "[pipeline][errors][gpus:4]") {
  require_four_devices();
  auto make = [](std::vector<int64_t> balance, std::vector<Device> devices, int64_t chunks = 2) {
    PipelineOptions options;
    options.balance = std::move(balance);
    nn::Sequential seq(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2));
    Pipeline pipe(seq, std::move(devices), chunks, Schedule::kGPipe, options);
  };
  CHECK_THROWS_WITH(make({2, 2}, {kCuda0, Device::cuda(1)}), Contains("covers 4 layers, the Sequential has 3"));
  CHECK_THROWS_WITH(make({3, 0}, {kCuda0, Device::cuda(1)}), Contains("stage 1") && Contains("has 0 layers"));
  CHECK_THROWS_WITH(make({1, 2}, {kCuda0, Device::cuda(1), Device::cuda(2)}),
                    Contains("the balance has 2 stages (1, 2), the devices x virtual stages 3"));
  CHECK_THROWS_WITH(make({}, cuda4()),
                    Contains("4 stages (4 devices x 1 virtual stages) need at least 4 layers, the Sequential has 3"));
  CHECK_THROWS_WITH(make({}, {kCuda0, Device::cuda(9)}), Contains("devices[1] is cuda:9") && Contains("not available"));
  CHECK_THROWS_WITH(make({}, {kCuda0, Device::cuda(1)}, 0), Contains("chunks must be at least 1, got 0"));
  auto make_with = [](Schedule schedule, PipelineOptions options, std::vector<Device> devices) {
    nn::Sequential seq(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 4), nn::ReLU(), nn::Linear(4, 2));
    Pipeline pipe(seq, std::move(devices), 2, schedule, options);
  };
  const std::vector<Device> two = {kCuda0, Device::cuda(1)};
  PipelineOptions v1, v2, v3, v0, auto_balance;
  v2.virtual_stages = 2;
  v3.virtual_stages = 3;
  v0.virtual_stages = 0;
  auto_balance.balance = {3, 2};
  CHECK_THROWS_WITH(make_with(Schedule::kInterleaved1F1B, v1, two),
                    Contains("interleaved schedule needs virtual_stages >= 2") && Contains("got 1"));
  CHECK_THROWS_WITH(make_with(Schedule::k1F1B, v2, two),
                    Contains("1f1b holds one model chunk per device") && Contains("virtual_stages 2"));
  CHECK_THROWS_WITH(make_with(Schedule::kGPipe, v0, two), Contains("virtual_stages must be at least 1, got 0"));
  CHECK_THROWS_WITH(make_with(Schedule::kInterleaved1F1B, v3, two),
                    Contains("6 stages (2 devices x 3 virtual stages) need at least 6 layers, the Sequential has 5"));
  CHECK_THROWS_WITH(make_with(Schedule::kAuto, auto_balance, two),
                    Contains("kAuto chooses the virtual stages and the balance") && Contains("a balance of 2 stages"));
  v2.balance = {1, 1, 1, 1};
  CHECK_THROWS_WITH(make_with(Schedule::kInterleaved1F1B, v2, two), Contains("covers 4 layers, the Sequential has 5"));
  nn::Sequential seq(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2));
  Pipeline pipe(seq, {Device(kCPU), kCuda0}, 2);
  CHECK_THROWS_WITH(pipe.to(Device::cuda(1)), Contains("Pipeline::to(cuda:1)") && Contains("cpu, cuda:0"));
  CHECK_THROWS_WITH(pipe.train_step(randn({4, 3}), randint(0, 2, {5}), ce),
                    Contains("the target must split like the input"));
  CHECK_THROWS_WITH(
      pipe.train_step(randn({4, 3}), randint(0, 2, {4}), [](const Tensor& o, const Tensor&) { return o; }),
      Contains("must return a scalar"));
  NoGradGuard no_grad;
  CHECK_THROWS_WITH(pipe.train_step(randn({4, 3}), randint(0, 2, {4}), ce), Contains("gradients are disabled"));
}

TEST_CASE("auto: measures, picks a schedule that fits the budget, and trains like the model",
          "[pipeline][auto][gpus:4]") {
  require_four_devices();
  manual_seed(371);
  const nn::Sequential base = plain_net();
  Generator g(372);
  const Tensor x = random_images(g, 8, 3, kSide, kSide), y = random_labels(g, 8, kClasses);
  const Grads want = reference_grads(copy_of(base, Device(kCPU)), x, y);
  PipelineOptions options;
  options.auto_chunks = {2, 4};
  auto pipe = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), cuda_devices(2), 4, Schedule::kAuto, options);
  CHECK(pipe->plan() == nullptr);
  pipe->zero_grad();
  // A forward before the choice runs on the first placement: its backward cannot follow the move.
  const Tensor early = pipe->forward(x);
  parallel::PipelineStep step = pipe->train_step(x, y, ce);
  CHECK_THROWS_WITH(ce(early, y.to(early.device())).backward(), Contains("the stages were placed anew"));
  const Grads got = step_grads(step, *pipe);
  REQUIRE(pipe->plan() != nullptr);
  const parallel::PipelinePlan& plan = *pipe->plan();
  INFO("chose " << plan.chosen().describe());
  check_grads("auto, " + plan.chosen().describe(), got, want, false);
  // Every candidate was simulated; the pipeline now runs the choice, and timed its first step.
  CHECK(plan.candidates.size() == 2 * (2 + 3));  // 8 layers on 2 devices: interleaved v = 2, 3, 4
  CHECK(pipe->schedule() == plan.chosen().schedule);
  CHECK(pipe->virtual_stages() == plan.chosen().virtual_stages);
  CHECK(pipe->chunks() == plan.chosen().micro_batches);
  CHECK(pipe->balance() == plan.chosen().balance);
  CHECK(plan.measured_step_s > 0);
  for (const auto& c : plan.candidates) {
    CHECK(c.simulated_step_s > 0);
    CHECK(c.held_bytes.size() == 2);
    CHECK(c.held_bytes[0] > 0);  // the emulated allocator's counts
    CHECK(c.simulated_step_s >= plan.chosen().simulated_step_s);
  }
  for (int64_t s = 0; s < pipe->num_stages(); ++s)
    for (const Tensor& prm : pipe->stage(s)->parameters()) CHECK(prm.device() == pipe->stage_device(s));
  // A budget below every candidate's activations: an Error naming the budget and the leanest.
  PipelineOptions tiny = options;
  tiny.memory_budget = 1;
  auto starved = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), cuda_devices(2), 4, Schedule::kAuto, tiny);
  CHECK_THROWS_WITH(starved->train_step(x, y, ce),
                    Contains("no schedule fits the memory budget of 1 activation bytes") && Contains("the leanest"));
  // A budget near the leanest: what is chosen fits it. Not exactly the leanest's bytes: a second
  // measurement may differ by an allocator block (a freed block's stream use still pending).
  int64_t leanest = std::numeric_limits<int64_t>::max();
  for (const auto& c : plan.candidates)
    leanest = std::min(leanest, *std::max_element(c.held_bytes.begin(), c.held_bytes.end()));
  PipelineOptions lean = options;
  lean.memory_budget = leanest + leanest / 4;
  auto fitted = std::make_shared<Pipeline>(copy_of(base, Device(kCPU)), cuda_devices(2), 4, Schedule::kAuto, lean);
  fitted->train_step(x, y, ce);
  const auto& held = fitted->plan()->chosen().held_bytes;
  CHECK(*std::max_element(held.begin(), held.end()) <= lean.memory_budget);
}

TEST_CASE("tensors a pipeline used outlive it: its streams are the pool's, never destroyed",
          "[pipeline][streams][gpus:4]") {
  require_four_devices();
  manual_seed(381);
  Watchdog watchdog("freeing tensors a destroyed pipeline used", 120);
  Generator g(382);
  Tensor x = random_images(g, 4, 3, kSide, kSide).to(kCuda0), y = random_labels(g, 4, kClasses);
  std::vector<Tensor> outputs;
  for (int k = 0; k < 3; ++k) {
    // The input's block is recorded on the first stage's stream; the output was made on the last's.
    auto pipe = std::make_shared<Pipeline>(plain_net(), cuda_devices(2), 2, Schedule::k1F1B);
    pipe->train_step(x, y, ce);
    NoGradGuard no_grad;
    outputs.push_back(pipe->forward(x));
  }
  x = Tensor();
  for (Tensor& out : outputs) CHECK(std::isfinite(out.sum().item<double>()));
  outputs.clear();
  for (int d = 0; d < 2; ++d) cuda::synchronize(d);
}
