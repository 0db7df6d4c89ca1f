// Pipeline schedules: the action lists (1F1B's in-flight bound, any m), stages that run each
// logical step's actions at once (so the bubble is (p - 1) / (m + p - 1)), and each stage's stored
// activations from the caching allocator's peaks: m micro-batches for GPipe, at most p - i for
// 1F1B.
#include <catch2/catch.hpp>

#include <chrono>
#include <iostream>
#include <thread>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "nn/nn.h"
#include "parallel/pipeline.h"
#include "tests/parallel/data_parallel_helpers.h"
#include "tests/parallel/schedule_rendezvous.h"
#include "tools/bench/pipeline_measure.h"

using namespace ember;
using namespace ember::testing;
using namespace ember::bench;
using parallel::Pipeline;
using parallel::PipelineAction;
using parallel::Schedule;

TEST_CASE("schedule lists: every micro-batch once each way, forward first; 1F1B holds at most p - i",
          "[pipeline][schedule]") {
  for (Schedule schedule : {Schedule::kGPipe, Schedule::k1F1B}) {
    for (int64_t p : {1, 2, 3, 5}) {
      for (int64_t m : {1, 2, 4, 7, 16}) {
        for (int64_t s = 0; s < p; ++s) {
          INFO(parallel::schedule_name(schedule) << " p=" << p << " m=" << m << " stage " << s);
          const std::vector<PipelineAction> actions = parallel::schedule_actions(schedule, s, p, m);
          REQUIRE(actions.size() == static_cast<size_t>(2 * m));
          std::vector<int> forwarded(m, 0), backwarded(m, 0);
          int64_t in_flight = 0, peak = 0;
          for (const PipelineAction& a : actions) {
            if (a.backward) {
              CHECK(forwarded[a.micro_batch] == 1);
              ++backwarded[a.micro_batch];
              --in_flight;
            } else {
              ++forwarded[a.micro_batch];
              peak = std::max(peak, ++in_flight);
            }
          }
          for (int64_t i = 0; i < m; ++i) CHECK((forwarded[i] == 1 && backwarded[i] == 1));
          CHECK(peak == (schedule == Schedule::kGPipe ? m : std::min(m, p - s)));
        }
      }
    }
  }
}

TEST_CASE("stages run every action of a logical step at once, so the bubble is (p - 1) / (m + p - 1)",
          "[pipeline][bubble][gpus:4]") {
  require_four_devices();
  // Events, not wall time: each stage's layer meets the other stages at every action, which only
  // a pipeline running the schedule's concurrent actions at once gets through
  // (schedule_rendezvous.h). A 30 s bound turns a pipeline that does not into a failure naming the
  // actions it left waiting.
  const auto mean_loss = [](const Tensor& out, const Tensor&) { return out.mean(); };
  for (Schedule schedule : {Schedule::kGPipe, Schedule::k1F1B}) {
    for (auto [p, m] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {2, 6}, {3, 5}, {4, 2}, {4, 8}}) {
      INFO(parallel::schedule_name(schedule) << " p=" << p << " m=" << m);
      auto rendezvous = std::make_shared<ScheduleRendezvous>(schedule, p, m, std::chrono::seconds(30));
      nn::Sequential seq;
      for (int64_t s = 0; s < p; ++s) seq->push_back(RendezvousLayer(s, rendezvous));
      Pipeline pipe(seq, cuda_devices(static_cast<int>(p)), m, schedule);
      try {
        pipe.train_step(ones({m, 4}, TensorOptions().device(kCuda0)), zeros({m}, TensorOptions(kInt64)), mean_loss);
      } catch (const Error& e) {
        FAIL_CHECK(e.what());
        continue;
      }
      // Each stage ran its schedule's actions in order; the logical timeline of the order they
      // ran in idles (p - 1) / (m + p - 1), that is, takes 2 (m + p - 1) steps.
      StageActions ran(static_cast<size_t>(p));
      for (const parallel::PipelineEvent& e : pipe.last_events())
        ran[static_cast<size_t>(e.stage)].push_back({e.micro_batch, e.backward});
      for (int64_t s = 0; s < p; ++s) {
        INFO("stage " << s);
        const std::vector<PipelineAction> expected = parallel::schedule_actions(schedule, s, p, m);
        REQUIRE(ran[s].size() == expected.size());
        for (size_t k = 0; k < expected.size(); ++k) {
          CHECK(ran[s][k].micro_batch == expected[k].micro_batch);
          CHECK(ran[s][k].backward == expected[k].backward);
        }
      }
      const LogicalTimeline timeline = logical_timeline(ran);
      const double bubble = logical_bubble(ran, timeline);
      std::cout << "bubble " << parallel::schedule_name(schedule) << " p=" << p << " m=" << m << ": " << bubble << " ("
                << timeline.makespan << " steps)" << std::endl;
      CHECK(timeline.makespan == 2 * (m + p - 1));
      CHECK(bubble == Approx(static_cast<double>(p - 1) / static_cast<double>(m + p - 1)).epsilon(1e-12));
    }
  }
}

TEST_CASE("stored activations per stage follow the schedule: m for GPipe, at most p - i for 1F1B",
          "[pipeline][memory][gpus:4]") {
  require_four_devices();
  // 256 wide: the activations still dominate, and the emulated GEMMs stay cheap enough for a loaded
  // machine (4096 took 100 s there, past the test's timeout when 4 runs shared the 2 cores).
  const int64_t p = 4, m = 8, hidden = 256;
  for (Schedule schedule : {Schedule::kGPipe, Schedule::k1F1B}) {
    const std::vector<double> held = measure_held_activations(p, m, schedule, hidden);
    for (int64_t s = 0; s < p; ++s) {
      const double expected = schedule == Schedule::kGPipe ? m : std::min(m, p - s);
      INFO(parallel::schedule_name(schedule) << " stage " << s << ": " << held[s] << " micro-batches' activations, "
                                             << "expected " << expected);
      std::cout << "held " << parallel::schedule_name(schedule) << " stage " << s << ": " << held[s] << " (schedule "
                << expected << ")" << std::endl;
      // A stage's backward briefly holds one more micro-batch's worth (the gradients it makes).
      CHECK(held[s] >= expected - 0.1);
      CHECK(held[s] <= expected + 1.1);
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
