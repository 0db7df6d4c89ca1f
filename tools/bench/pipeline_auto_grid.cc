// See pipeline_auto_grid.h. The layers are FixedCost (host waits) on rows `kWidth` floats wide, so
// step times mean the same on emulated devices, and each layer's output is activation memory that
// the schedules hold differently.
#include "tools/bench/pipeline_auto_grid.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "core/ember_core.h"
#include "parallel/pipeline.h"
#include "tools/bench/pipeline_measure.h"

namespace ember::bench {

namespace {

using parallel::Schedule;

constexpr int64_t kLayersPerDevice = 4, kBatch = 32, kWidth = 1024;

nn::Sequential fixed_cost_layers(int64_t p, double action_s) {
  nn::Sequential seq;
  for (int64_t k = 0; k < p * kLayersPerDevice; ++k) seq->push_back(FixedCost(action_s / kLayersPerDevice));
  return seq;
}

std::vector<Device> devices_for(int64_t p) {
  std::vector<Device> devices;
  for (int64_t d = 0; d < p; ++d) devices.push_back(Device::cuda(static_cast<int>(d)));
  return devices;
}

// One kAuto pipeline's plan and measured run, or why it refused.
struct AutoRun {
  ScheduleRun run;
  std::optional<parallel::PipelinePlan> plan;
  std::string error;
};

AutoRun run_auto(int64_t p, int64_t m, int64_t budget, double action_s, const Tensor& x, const Tensor& y, int steps) {
  parallel::PipelineOptions options;
  options.memory_budget = budget;
  options.auto_chunks = {m};
  parallel::Pipeline pipe(fixed_cost_layers(p, action_s), devices_for(p), m, Schedule::kAuto, options);
  AutoRun result;
  try {
    result.run = measure_schedule(pipe, x, y, steps);
    result.plan = *pipe.plan();
  } catch (const Error& e) {
    result.error = e.what();
  }
  return result;
}

}  // namespace

AutoGridResult run_auto_grid(const std::vector<int64_t>& ps, bool quick, double action_s) {
  const std::vector<int64_t> ms = quick ? std::vector<int64_t>{4} : std::vector<int64_t>{4, 8};
  const int steps = quick ? 2 : 3;
  const Tensor x = randn({kBatch, kWidth}).to(Device::cuda(0));
  const Tensor y = zeros({kBatch}, TensorOptions(kInt64));
  std::printf(
      "\nauto (Schedule::kAuto): %lld fixed-cost layers per device, batch %lld x %lld floats; budgets in KiB of "
      "activations per device (0: none); each schedule split as kAuto splits it\n",
      static_cast<long long>(kLayersPerDevice), static_cast<long long>(kBatch), static_cast<long long>(kWidth));
  int cases = 0, good = 0;
  double sim_err_max = 0;
  for (int64_t p : ps) {
    if (quick && p > 2) continue;
    for (int64_t m : ms) {
      // Without a budget first: its plan gives every candidate's balance (by measured time), which
      // the schedules below are measured with, so that they are the runs kAuto chooses among.
      const AutoRun unbounded = run_auto(p, m, 0, action_s, x, y, steps);
      if (!unbounded.plan) {
        std::printf("p=%lld m=%lld: auto failed: %s\n", static_cast<long long>(p), static_cast<long long>(m),
                    unbounded.error.c_str());
        ++cases;
        continue;
      }
      const std::vector<parallel::PipelineCandidate>& candidates = unbounded.plan->candidates;
      std::vector<ScheduleRun> runs;
      std::printf("p=%lld m=%lld: %-20s %10s %10s %10s\n", static_cast<long long>(p), static_cast<long long>(m),
                  "schedule", "step_ms", "sim_ms", "peak_KiB");
      for (const parallel::PipelineCandidate& c : candidates) {
        parallel::PipelineOptions options;
        options.virtual_stages = c.virtual_stages;
        options.balance = c.balance;
        parallel::Pipeline pipe(fixed_cost_layers(p, action_s), devices_for(p), m, c.schedule, options);
        runs.push_back(measure_schedule(pipe, x, y, steps));
        std::printf("%13s %-20s %10.1f %10.1f %10.1f\n", "", c.describe().c_str(), runs.back().step_s * 1e3,
                    c.simulated_step_s * 1e3, runs.back().peak_bytes / 1024.0);
      }
      // Budgets between the leanest measured peaks: each lets a different set of schedules in.
      std::vector<int64_t> peaks;
      for (const ScheduleRun& r : runs) peaks.push_back(r.peak_bytes);
      std::sort(peaks.begin(), peaks.end());
      std::vector<int64_t> budgets = {0};
      for (size_t k = 0; k + 1 < peaks.size() && budgets.size() < 3; ++k)
        if (peaks[k + 1] > peaks[k] * 21 / 20) budgets.push_back((peaks[k] + peaks[k + 1]) / 2);
      std::printf("%13s %10s %-20s %10s %10s %-20s %10s %6s %8s\n", "", "budget", "auto", "sim_ms", "step_ms",
                  "fastest_fit", "step_ms", "ok", "sim_err");
      for (int64_t budget : budgets) {
        size_t fastest = runs.size();
        for (size_t k = 0; k < runs.size(); ++k)
          if ((budget == 0 || runs[k].peak_bytes <= budget) &&
              (fastest == runs.size() || runs[k].step_s < runs[fastest].step_s))
            fastest = k;
        const AutoRun a = budget == 0 ? unbounded : run_auto(p, m, budget, action_s, x, y, steps);
        ++cases;
        if (!a.plan) {
          std::printf("%13s %10.1f auto failed: %s\n", "", budget / 1024.0, a.error.c_str());
          continue;
        }
        const parallel::PipelineCandidate& pick = a.plan->chosen();
        const bool fits = budget == 0 || a.run.peak_bytes <= budget;
        const bool ok = fits && fastest < runs.size() && a.run.step_s <= 1.05 * runs[fastest].step_s;
        const double err = std::abs(pick.simulated_step_s - a.run.step_s) / a.run.step_s;
        good += ok ? 1 : 0;
        sim_err_max = std::max(sim_err_max, err);
        std::printf("%13s %10.1f %-20s %10.1f %10.1f %-20s %10.1f %6s %8.3f\n", "", budget / 1024.0,
                    pick.describe().c_str(), pick.simulated_step_s * 1e3, a.run.step_s * 1e3,
                    fastest < runs.size() ? candidates[fastest].describe().c_str() : "none",
                    fastest < runs.size() ? runs[fastest].step_s * 1e3 : 0.0, ok ? "yes" : (fits ? "slow" : "over"),
                    err);
      }
    }
  }
  return {cases > 0 ? static_cast<double>(good) / cases : 0.0, sim_err_max};
}

}  // namespace ember::bench
