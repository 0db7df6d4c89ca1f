// Pipeline schedules: the action lists (each schedule's in-flight bound, any m, no list waiting on
// another), the simulator against hand-computed makespans, kAuto's choice from given costs, stages
// that run each logical step's actions at once (so the bubble is (p - 1) / (m + p - 1), and
// smaller interleaved), and each device's stored activations from the caching allocator's peaks:
// m micro-batches for GPipe, at most p - i for 1F1B, the warm-up + 1 chunks for interleaved.
#include <catch2/catch.hpp>

#include <chrono>
#include <iostream>
#include <thread>

#include "core/ember_core.h"
#include "core/profiler.h"
#include "cuda/api.h"
#include "nn/nn.h"
#include "parallel/pipeline.h"
#include "tests/parallel/data_parallel_helpers.h"
#include "tests/parallel/pipeline_cases.h"
#include "tests/parallel/schedule_rendezvous.h"
#include "tests/trace_checks.h"
#include "tools/bench/pipeline_measure.h"

using namespace ember;
using namespace ember::testing;
using namespace ember::bench;
using Catch::Contains;
using parallel::Pipeline;
using parallel::PipelineAction;
using parallel::Schedule;
using parallel::StageCost;

namespace {

// The most (chunk, micro-batch) pairs device d of p holds at once under `c`, in closed form
// (interleaved with p dividing m; otherwise at most that).
int64_t held_bound(const ScheduleCase& c, int64_t d, int64_t p, int64_t m) {
  const int64_t v = c.virtual_stages;
  if (c.schedule == Schedule::kGPipe) return m * v;
  if (c.schedule == Schedule::k1F1B) return std::min(m, p - d);
  return std::min(m * v, 2 * (p - 1 - d) + (v - 1) * p + 1);
}

std::vector<ScheduleCase> cases_and_v3() {
  std::vector<ScheduleCase> cases = schedule_cases();
  cases.push_back({Schedule::kInterleaved1F1B, 3});
  return cases;
}

}  // namespace

TEST_CASE("schedule lists: every (chunk, micro-batch) once each way, forward first, within the schedule's bound",
          "[pipeline][schedule]") {
  for (const ScheduleCase& c : cases_and_v3()) {
    const int64_t v = c.virtual_stages;
    for (int64_t p : {1, 2, 3, 5}) {
      for (int64_t m : {1, 2, 4, 7, 16}) {
        const auto lists = parallel::per_device_actions(c.schedule, p, m, v);
        const parallel::SimulatedSchedule sim =
            parallel::simulate_schedule(lists, std::vector<StageCost>(p * v, {1, 1, 0, 0}));
        for (int64_t d = 0; d < p; ++d) {
          INFO(c.name() << " p=" << p << " m=" << m << " device " << d);
          const std::vector<PipelineAction>& actions = lists[d];
          REQUIRE(actions.size() == static_cast<size_t>(2 * m * v));
          std::vector<int> forwarded(m * v, 0), backwarded(m * v, 0);
          int64_t in_flight = 0, peak = 0;
          for (const PipelineAction& a : actions) {
            REQUIRE((a.chunk >= 0 && a.chunk < v));
            const int64_t k = a.chunk * m + a.micro_batch;
            if (a.backward) {
              CHECK(forwarded[k] == 1);
              ++backwarded[k];
              --in_flight;
            } else {
              ++forwarded[k];
              peak = std::max(peak, ++in_flight);
            }
          }
          for (int64_t k = 0; k < m * v; ++k) CHECK((forwarded[k] == 1 && backwarded[k] == 1));
          CHECK(peak <= held_bound(c, d, p, m));
          if (c.schedule != Schedule::kInterleaved1F1B || m % p == 0) CHECK(peak == held_bound(c, d, p, m));
          CHECK(sim.peak_held_micro_batches[d] == peak);
        }
        // Equal unit actions: GPipe and 1F1B take 2 (m + p - 1) steps; interleaved, with a step per
        // chunk, 2 (m v + p - 1) when p divides m, and fewer than 1F1B's in its time otherwise too
        // (one micro-batch has nothing to overlap).
        INFO(c.name() << " p=" << p << " m=" << m);
        if (c.schedule != Schedule::kInterleaved1F1B) CHECK(sim.makespan_s == 2 * (m + p - 1));
        if (c.schedule == Schedule::kInterleaved1F1B && m % p == 0) CHECK(sim.makespan_s == 2 * (m * v + p - 1));
        if (c.schedule == Schedule::kInterleaved1F1B && p > 1 && m > 1) CHECK(sim.makespan_s / v < 2 * (m + p - 1));
      }
    }
  }
}

TEST_CASE("interleaved lists never wait on each other, whatever m", "[pipeline][schedule]") {
  // Megatron-LM requires p | m; here the lists of the next multiple drop the extra micro-batches
  // (pipeline_schedule.cc). Never slower than 1F1B either, in the same units (a chunk's action is
  // 1/v of a stage's).
  for (int64_t p = 1; p <= 8; ++p) {
    for (int64_t v = 2; v <= 4; ++v) {
      for (int64_t m = 1; m <= 32; ++m) {
        INFO("p=" << p << " v=" << v << " m=" << m);
        parallel::SimulatedSchedule sim;
        REQUIRE_NOTHROW(
            sim = parallel::simulate_schedule(parallel::per_device_actions(Schedule::kInterleaved1F1B, p, m, v),
                                              std::vector<StageCost>(p * v, {1, 1, 0, 0})));
        CHECK(sim.makespan_s / v <= 2 * (m + p - 1));
      }
    }
  }
}

TEST_CASE("schedule and simulator errors name what was expected", "[pipeline][schedule][errors]") {
  CHECK_THROWS_WITH(parallel::schedule_actions(Schedule::k1F1B, 0, 2, 4, 2),
                    Contains("1f1b") && Contains("virtual stages 1), got 2"));
  CHECK_THROWS_WITH(parallel::schedule_actions(Schedule::kInterleaved1F1B, 0, 2, 4, 1),
                    Contains("interleaved") && Contains("at least 2 virtual stages") && Contains("got 1"));
  CHECK_THROWS_WITH(parallel::schedule_actions(Schedule::kGPipe, 0, 2, 4, 0), Contains("at least 1, got 0"));
  CHECK_THROWS_WITH(parallel::schedule_actions(Schedule::kAuto, 0, 2, 4), Contains("kAuto has no lists"));
  // Device 0 runs micro-batch 0's backward before its forward: the two devices wait on each other.
  const std::vector<std::vector<PipelineAction>> cyclic = {{{0, true, 0}, {0, false, 0}},
                                                           {{0, false, 0}, {0, true, 0}}};
  CHECK_THROWS_WITH(parallel::simulate_schedule(cyclic, std::vector<StageCost>(2, {1, 1, 0, 0})),
                    Contains("wait on each other") && Contains("device 0 at the backward of micro-batch 0") &&
                        Contains("device 1 at the forward of micro-batch 0"));
  CHECK_THROWS_WITH(parallel::simulate_schedule(cyclic, std::vector<StageCost>(3, {1, 1, 0, 0})),
                    Contains("3 stage costs for 2 devices"));
}

TEST_CASE("simulator: makespans and held memory computed by hand", "[pipeline][schedule][simulate]") {
  // Equal costs f = 1, b = 2: GPipe and 1F1B take (m + p - 1) (f + b).
  for (Schedule schedule : {Schedule::kGPipe, Schedule::k1F1B}) {
    const auto sim = parallel::simulate_schedule(parallel::per_device_actions(schedule, 3, 4),
                                                 std::vector<StageCost>(3, {1, 2, 0, 0}));
    CHECK(sim.makespan_s == Approx((4 + 3 - 1) * 3.0));
  }
  // GPipe, p = 2, m = 2, stage 1 three times slower. Device 0: F0 [0,1] F1 [1,2]; device 1:
  // F0 [1,4] F1 [4,7] B1 [7,10] B0 [10,13]; device 0: B1 [10,11] B0 [13,14].
  const std::vector<StageCost> costs = {{1, 1, 10, 0}, {3, 3, 20, 7}};
  const auto sim = parallel::simulate_schedule(parallel::per_device_actions(Schedule::kGPipe, 2, 2), costs);
  CHECK(sim.makespan_s == Approx(14));
  CHECK(sim.start_s[1] == std::vector<double>{1, 4, 7, 10});
  CHECK(sim.start_s[0] == std::vector<double>{0, 1, 10, 13});
  CHECK(sim.bubble == Approx(((1 - 4.0 / 14) + (1 - 12.0 / 14)) / 2));
  // Held: both micro-batches at once, plus the backward's extra on device 1.
  CHECK(sim.peak_held_bytes == std::vector<int64_t>{20, 47});
  CHECK(sim.peak_held_micro_batches == std::vector<int64_t>{2, 2});
  // The gradient a backward sends stays on its device until the stage before starts that
  // backward. Device 0's backwards take 4: B1 [4,8], B0 [8,12]; device 1 ends B0 at 5, so its
  // 5-byte message waits there until 8, above the 2 x 2 bytes its forwards held.
  const std::vector<StageCost> slow_first = {{1, 4, 10, 0, 0}, {1, 1, 2, 0, 5}};
  const auto waiting = parallel::simulate_schedule(parallel::per_device_actions(Schedule::kGPipe, 2, 2), slow_first);
  CHECK(waiting.start_s[0] == std::vector<double>{0, 1, 4, 8});
  CHECK(waiting.peak_held_bytes[1] == 5);
}

TEST_CASE("auto: the fastest candidate that fits the memory budget, or an Error naming the leanest",
          "[pipeline][auto]") {
  // 8 equal layers on 2 devices, m = 4: GPipe and 1F1B take (4 + 1) (4 + 8) = 60; interleaved
  // less, least with v = 4. Held bytes on device 0: 1F1B 2 micro-batches x 4 layers x 100, plus
  // in the backward its extra (10) and the gradient it received from device 1 (50): 860; GPipe
  // 1660; interleaved v = 4 holds 9 (stage, micro-batch) pairs of one layer at its first backward:
  // 3 of stage 0, and 2 each of stages 2, 4 and 6, which also keep the input (50) they received
  // from device 1: 300 + 6 x 150 + 60.
  std::map<int64_t, std::vector<parallel::LayerCost>> costs;
  costs[4] = std::vector<parallel::LayerCost>(8, {1, 2, 100, 10, 50});
  const parallel::PipelinePlan free = parallel::plan_pipeline(costs, 2, 0, false);
  CHECK(free.chosen().schedule == Schedule::kInterleaved1F1B);
  CHECK(free.chosen().virtual_stages == 4);
  CHECK(free.chosen().simulated_step_s < 60);
  for (const auto& c : free.candidates) {
    INFO(c.describe());
    if (c.schedule != Schedule::kInterleaved1F1B) CHECK(c.simulated_step_s == Approx(60));
    if (c.schedule == Schedule::k1F1B) CHECK(c.held_bytes[0] == 860);
    if (c.schedule == Schedule::kGPipe) CHECK(c.held_bytes[0] == 1660);
    if (c.schedule == Schedule::kInterleaved1F1B && c.virtual_stages == 4) CHECK(c.held_bytes[0] == 1260);
  }
  const parallel::PipelinePlan tight = parallel::plan_pipeline(costs, 2, 900, false);
  CHECK(tight.chosen().schedule == Schedule::k1F1B);
  CHECK_THROWS_WITH(parallel::plan_pipeline(costs, 2, 500, false),
                    Contains("no schedule fits the memory budget of 500") && Contains("1f1b m=4, needs 860"));
  // Recomputation keeps each stage's input only: 1F1B holds 2 x 50, and its backward reruns the
  // forward, holding 400 + 10 + 50 more.
  const parallel::PipelinePlan recompute = parallel::plan_pipeline(costs, 2, 0, true);
  for (const auto& c : recompute.candidates)
    if (c.schedule == Schedule::k1F1B) CHECK(c.held_bytes[0] == 2 * 50 + 460);
  // More micro-batches: each candidate count is simulated with its own costs.
  costs[2] = std::vector<parallel::LayerCost>(8, {2, 4, 200, 20, 100});
  const parallel::PipelinePlan two = parallel::plan_pipeline(costs, 2, 0, false);
  CHECK(two.candidates.size() == 2 * (2 + 3));
  CHECK(two.chosen().micro_batches == 4);
}

TEST_CASE("stages run every action of a logical step at once, so the bubble is (p - 1) / (m + p - 1)",
          "[pipeline][bubble][gpus:4]") {
  require_four_devices();
  // Events, not wall time: each stage's layer meets the other devices at every action, which only
  // a pipeline running the schedule's concurrent actions at once gets through
  // (schedule_rendezvous.h). A 30 s bound turns a pipeline that does not into a failure naming the
  // actions it left waiting.
  const auto mean_loss = [](const Tensor& out, const Tensor&) { return out.mean(); };
  for (auto [p, m] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {2, 6}, {3, 5}, {4, 2}, {4, 8}}) {
    double one_f_one_b_bubble = 0;
    for (const ScheduleCase& c : schedule_cases()) {
      const int64_t v = c.virtual_stages;
      INFO(c.name() << " p=" << p << " m=" << m);
      auto rendezvous = std::make_shared<ScheduleRendezvous>(c.schedule, p, m, std::chrono::seconds(30), v);
      nn::Sequential seq;
      for (int64_t s = 0; s < p * v; ++s) seq->push_back(RendezvousLayer(s, rendezvous));
      Pipeline pipe(seq, cuda_devices(static_cast<int>(p)), m, c.schedule, c.options());
      try {
        pipe.train_step(ones({m, 4}, TensorOptions().device(kCuda0)), zeros({m}, TensorOptions(kInt64)), mean_loss);
      } catch (const Error& e) {
        FAIL_CHECK(e.what());
        continue;
      }
      // Each device ran its schedule's actions in order; the logical timeline of the order they
      // ran in idles (p - 1) / (m + p - 1), that is, takes 2 (m + p - 1) steps.
      StageActions ran(static_cast<size_t>(p));
      for (const parallel::PipelineEvent& e : pipe.last_events()) {
        CHECK(e.stage % p == e.device_index);
        ran[static_cast<size_t>(e.device_index)].push_back({e.micro_batch, e.backward, e.stage / p});
      }
      for (int64_t d = 0; d < p; ++d) {
        INFO("device " << d);
        const std::vector<PipelineAction> expected = parallel::schedule_actions(c.schedule, d, p, m, v);
        REQUIRE(ran[d].size() == expected.size());
        for (size_t k = 0; k < expected.size(); ++k) {
          CHECK(ran[d][k].micro_batch == expected[k].micro_batch);
          CHECK(ran[d][k].backward == expected[k].backward);
          CHECK(ran[d][k].chunk == expected[k].chunk);
        }
      }
      const LogicalTimeline timeline = logical_timeline(ran);
      const double bubble = logical_bubble(ran, timeline);
      std::cout << "bubble " << c.name() << " p=" << p << " m=" << m << ": " << bubble << " (" << timeline.makespan
                << " steps)" << std::endl;
      if (c.schedule == Schedule::kInterleaved1F1B) {
        // A step is a chunk's action, 1/v of a stage's: the bubble shrinks about v-fold.
        if (m > 1) CHECK(bubble < one_f_one_b_bubble);  // one micro-batch has nothing to overlap
        if (m % p == 0) CHECK(timeline.makespan == 2 * (m * v + p - 1));
        continue;
      }
      if (c.schedule == Schedule::k1F1B) one_f_one_b_bubble = bubble;
      CHECK(timeline.makespan == 2 * (m + p - 1));
      CHECK(bubble == Approx(static_cast<double>(p - 1) / static_cast<double>(m + p - 1)).epsilon(1e-12));
    }
  }
}

TEST_CASE(
    "stored activations per device follow the schedule: m for GPipe, p - i for 1F1B, its warm-up + 1 "
    "interleaved",
    "[pipeline][memory][gpus:4]") {
  require_four_devices();
  // 256 wide: the activations still dominate, and the emulated GEMMs stay cheap enough for a loaded
  // machine (4096 took 100 s there, past the test's timeout when 4 runs shared the 2 cores).
  const int64_t p = 4, m = 8, hidden = 256;
  for (const ScheduleCase& c : schedule_cases()) {
    const std::vector<double> held = measure_held_activations(p, m, c.schedule, hidden, c.virtual_stages);
    for (int64_t d = 0; d < p; ++d) {
      const double expected = static_cast<double>(held_bound(c, d, p, m));
      INFO(c.name() << " device " << d << ": " << held[d] << " (stage, micro-batch) activations, expected "
                    << expected);
      std::cout << "held " << c.name() << " device " << d << ": " << held[d] << " (schedule " << expected << ")"
                << std::endl;
      // A device's backward briefly holds one more micro-batch's worth (the gradients it makes).
      CHECK(held[d] >= expected - 0.1);
      CHECK(held[d] <= expected + 1.1);
    }
  }
}

namespace {

// A layer whose every forward outlasts everything since `since`. balance_by_time measures one layer
// after another, so however a loaded machine stretched the layers before it (1 ms waits may take
// 10), each of its measurements exceeds all of theirs together.
struct OutlastingImpl : nn::Cloneable<OutlastingImpl> {
  OutlastingImpl() : Cloneable("Outlasting") { reset(); }
  void reset() override { weight = register_parameter("weight", ones({})); }
  Tensor forward(const Tensor& x) override {
    const auto entered = std::chrono::steady_clock::now();
    const auto until = entered + (entered - since);
    while (std::chrono::steady_clock::now() <= until) std::this_thread::sleep_until(until);
    return x * weight;
  }
  std::chrono::steady_clock::time_point since;
  Tensor weight;
};
EMBER_MODULE(Outlasting);

}  // namespace

TEST_CASE("balance: contiguous stages minimising the largest cost, by parameters or measured time",
          "[pipeline][balance]") {
  using parallel::balance_costs;
  CHECK(balance_costs({1, 1, 1, 1, 10}, 2) == std::vector<int64_t>{4, 1});
  CHECK(balance_costs({5, 1, 1, 1, 1, 5}, 3) == std::vector<int64_t>{1, 4, 1});
  CHECK(balance_costs({2, 2, 2, 2}, 4) == std::vector<int64_t>{1, 1, 1, 1});
  CHECK_THROWS_WITH(balance_costs({1, 2}, 3), Catch::Contains("cannot split 2 layers into 3 non-empty stages"));
  // By parameters: the wide layer alone on one stage.
  nn::Sequential by_params(nn::Linear(2, 3), nn::ReLU(), nn::Linear(3, 3), nn::Linear(3, 300), nn::Linear(300, 2));
  CHECK(parallel::balance_by_parameters(by_params, 2) == std::vector<int64_t>{4, 1});
  // By time: the slow layer alone on one stage (by parameters the BatchNorm's 8 would split 2 + 2);
  // the measurement leaves no gradient, no running-statistics count and no draw from the global
  // generator behind.
  Outlasting slow;
  nn::Sequential by_time(FixedCost(0.001), nn::BatchNorm1d(4), FixedCost(0.001), slow);
  manual_seed(5);
  const Tensor sample = randn({3, 4});
  const auto generator_before = default_generator().state();
  slow->since = std::chrono::steady_clock::now();
  CHECK(parallel::balance_by_time(by_time, sample, 2) == std::vector<int64_t>{3, 1});
  CHECK(default_generator().state() == generator_before);
  for (const Tensor& p : by_time->parameters()) CHECK_FALSE(p.grad().defined());
  const auto buffers = by_time->named_buffers();
  for (const auto& [name, b] : buffers) {
    INFO(name);
    if (name.find("num_batches_tracked") != std::string::npos) CHECK(b.item<int64_t>() == 0);
    if (name.find("running_mean") != std::string::npos) CHECK(b.abs().sum().item<double>() == 0.0);
  }
}

// The timeline (core/profiler.h) of a profiled step: each action on its device's thread (named
// for the device), its wait for the neighbour's message apart, and its work timed on the stage's
// stream by the device; well formed for Perfetto.
TEST_CASE("profiler: a pipeline step's actions on each device's track", "[pipeline][profiler][gpus:4]") {
  require_four_devices();
  const int64_t p = 2, m = 3;
  nn::Sequential seq(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  Pipeline pipe(seq, cuda_devices(static_cast<int>(p)), m, Schedule::k1F1B);
  const auto mean_loss = [](const Tensor& out, const Tensor&) { return out.mean(); };
  profiler::Session session;
  session.start();
  pipe.train_step(ones({6, 4}, TensorOptions().device(kCuda0)), zeros({6}, TensorOptions(kInt64)), mean_loss);
  session.stop();
  const auto events = parse_trace(session.chrome_trace());
  INFO(malformed(events));
  CHECK(malformed(events).empty());
  const auto tracks = session.thread_names();
  int host = 0, device = 0;
  for (const TraceEvent& e : events) {
    if (e.category != "pipeline" || e.phase != "X" || e.name.rfind("stage ", 0) != 0) continue;
    const std::string& track = tracks.at(static_cast<size_t>(e.tid));
    if (track.rfind("pipeline device ", 0) == 0) ++host;
    if (track.rfind("cuda:", 0) == 0) ++device;
  }
  CHECK(host == 2 * p * m);  // every stage's forward and backward of every micro-batch
  CHECK(device == 2 * p * m);
}
