// See pipeline_auto_grid.h. The layers are FixedCost (host waits) on rows `kWidth` floats wide, so
// step times mean the same on emulated devices, and each layer's output is activation memory that
// the schedules hold differently.
#include "tools/bench/pipeline_auto_grid.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/ember_core.h"
#include "parallel/pipeline.h"
#include "tools/bench/pipeline_measure.h"

namespace ember::bench {

namespace {

using parallel::Schedule;

constexpr int64_t kLayersPerDevice = 4, kBatch = 32, kWidth = 1024;

struct Candidate {
  Schedule schedule;
  int64_t v;
  std::string name() const {
    return v > 1 ? std::string("interleaved v=") + std::to_string(v) : std::string(parallel::schedule_name(schedule));
  }
};

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

}  // namespace

AutoGridResult run_auto_grid(const std::vector<int64_t>& ps, bool quick, double action_s) {
  const std::vector<int64_t> ms = quick ? std::vector<int64_t>{4} : std::vector<int64_t>{4, 8};
  const int steps = quick ? 2 : 3;
  const Tensor x = randn({kBatch, kWidth}).to(Device::cuda(0));
  const Tensor y = zeros({kBatch}, TensorOptions(kInt64));
  std::printf(
      "\nauto (Schedule::kAuto): %lld fixed-cost layers per device, batch %lld x %lld floats; budgets in KiB of "
      "activations per device (0: none)\n",
      static_cast<long long>(kLayersPerDevice), static_cast<long long>(kBatch), static_cast<long long>(kWidth));
  int cases = 0, good = 0;
  double sim_err_max = 0;
  for (int64_t p : ps) {
    if (quick && p > 2) continue;
    for (int64_t m : ms) {
      std::vector<Candidate> candidates = {{Schedule::kGPipe, 1}, {Schedule::k1F1B, 1}};
      for (int64_t v = 2; v <= std::min<int64_t>(8, kLayersPerDevice); ++v)
        candidates.push_back({Schedule::kInterleaved1F1B, v});
      std::vector<ScheduleRun> runs;
      std::printf("p=%lld m=%lld: %-16s %10s %10s\n", static_cast<long long>(p), static_cast<long long>(m), "schedule",
                  "step_ms", "peak_KiB");
      for (const Candidate& c : candidates) {
        parallel::PipelineOptions options;
        options.virtual_stages = c.v;
        parallel::Pipeline pipe(fixed_cost_layers(p, action_s), devices_for(p), m, c.schedule, options);
        runs.push_back(measure_schedule(pipe, x, y, steps));
        std::printf("%13s %-16s %10.1f %10.1f\n", "", c.name().c_str(), runs.back().step_s * 1e3,
                    runs.back().peak_bytes / 1024.0);
      }
      // Budgets between the leanest measured peaks: each lets a different set of schedules in.
      std::vector<int64_t> peaks;
      for (const ScheduleRun& r : runs) peaks.push_back(r.peak_bytes);
      std::sort(peaks.begin(), peaks.end());
      std::vector<int64_t> budgets = {0};
      for (size_t k = 0; k + 1 < peaks.size() && budgets.size() < 3; ++k)
        if (peaks[k + 1] > peaks[k] * 21 / 20) budgets.push_back((peaks[k] + peaks[k + 1]) / 2);
      std::printf("%13s %10s %-16s %10s %10s %-16s %10s %6s %8s\n", "", "budget", "auto", "sim_ms", "step_ms",
                  "fastest_fit", "step_ms", "ok", "sim_err");
      for (int64_t budget : budgets) {
        size_t fastest = runs.size();
        for (size_t k = 0; k < runs.size(); ++k)
          if ((budget == 0 || runs[k].peak_bytes <= budget) &&
              (fastest == runs.size() || runs[k].step_s < runs[fastest].step_s))
            fastest = k;
        parallel::PipelineOptions options;
        options.memory_budget = budget;
        options.auto_chunks = {m};
        parallel::Pipeline pipe(fixed_cost_layers(p, action_s), devices_for(p), m, Schedule::kAuto, options);
        ++cases;
        ScheduleRun chosen;
        try {
          chosen = measure_schedule(pipe, x, y, steps);
        } catch (const Error& e) {
          std::printf("%13s %10.1f auto failed: %s\n", "", budget / 1024.0, e.what());
          continue;
        }
        const parallel::PipelineCandidate& pick = pipe.plan()->chosen();
        const Candidate picked{pick.schedule, pick.virtual_stages};
        const bool fits = budget == 0 || chosen.peak_bytes <= budget;
        const bool ok = fits && fastest < runs.size() && chosen.step_s <= 1.05 * runs[fastest].step_s;
        const double err = std::abs(pick.simulated_step_s - chosen.step_s) / chosen.step_s;
        good += ok ? 1 : 0;
        sim_err_max = std::max(sim_err_max, err);
        std::printf("%13s %10.1f %-16s %10.1f %10.1f %-16s %10.1f %6s %8.3f\n", "", budget / 1024.0,
                    picked.name().c_str(), pick.simulated_step_s * 1e3, chosen.step_s * 1e3,
                    fastest < runs.size() ? candidates[fastest].name().c_str() : "none",
                    fastest < runs.size() ? runs[fastest].step_s * 1e3 : 0.0, ok ? "yes" : (fits ? "slow" : "over"),
                    err);
      }
    }
  }
  return {cases > 0 ? static_cast<double>(good) / cases : 0.0, sim_err_max};
}

}  // namespace ember::bench
