// Pipeline schedules: the action lists (1F1B's in-flight bound, any m), the measured bubble with
// stages of fixed cost against (p - 1) / (m + p - 1), and each stage's stored activations from
// the caching allocator's peaks: m micro-batches for GPipe, at most p - i for 1F1B.
#include <catch2/catch.hpp>

#include <chrono>
#include <iostream>
#include <thread>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "nn/nn.h"
#include "parallel/pipeline.h"
#include "tests/parallel/data_parallel_helpers.h"
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

TEST_CASE("the measured bubble of stages of fixed cost is (p - 1) / (m + p - 1) within 0.05",
          "[pipeline][bubble]") {
  require_four_devices();
  for (Schedule schedule : {Schedule::kGPipe, Schedule::k1F1B}) {
    for (auto [p, m] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {2, 6}, {4, 2}, {4, 8}}) {
      INFO(parallel::schedule_name(schedule) << " p=" << p << " m=" << m);
      const BubbleRun r = measure_bubble(p, m, schedule, 0.008);
      std::cout << "bubble " << parallel::schedule_name(schedule) << " p=" << p << " m=" << m << ": measured "
                << r.measured << ", expected " << r.expected << std::endl;
      CHECK(std::abs(r.measured - r.expected) <= 0.05);
    }
  }
}

TEST_CASE("stored activations per stage follow the schedule: m for GPipe, at most p - i for 1F1B",
          "[pipeline][memory]") {
  require_four_devices();
#if defined(__SANITIZE_ADDRESS__)
  const int64_t p = 4, m = 6, hidden = 256;  // the emulated GEMMs under ASan are ~15x slower
#else
  const int64_t p = 4, m = 8, hidden = 4096;
#endif
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
  // By time: the slow layer (6 ms against 1 ms) alone on one stage; the measurement leaves no
  // gradient, no running-statistics count and no draw from the global generator behind.
  nn::Sequential by_time(FixedCost(0.001), nn::BatchNorm1d(4), FixedCost(0.001), FixedCost(0.006));
  manual_seed(5);
  const Tensor sample = randn({3, 4});
  const auto generator_before = default_generator().state();
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
