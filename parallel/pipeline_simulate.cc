// The schedule simulator: a device's actions run in list order, each once its input is in. It
// sweeps the devices until none can start another action; what is left then waits on a cycle.
// Memory then follows the timeline: what an action takes and gives back, in time order per device.
#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "parallel/pipeline_schedule.h"

namespace ember::parallel {

SimulatedSchedule simulate_schedule(const std::vector<std::vector<PipelineAction>>& actions,
                                    const std::vector<StageCost>& costs) {
  const int64_t p = static_cast<int64_t>(actions.size());
  const int64_t stages = static_cast<int64_t>(costs.size());
  EMBER_CHECK(p >= 1 && stages >= p && stages % p == 0, "simulate_schedule: ", stages, " stage costs for ", p,
              " devices (expected a multiple of the devices)");
  SimulatedSchedule sim;
  sim.start_s.resize(actions.size());
  sim.end_s.resize(actions.size());
  std::map<std::tuple<int64_t, int64_t, bool>, double> done;     // (stage, micro-batch, backward) -> end
  std::map<std::tuple<int64_t, int64_t, bool>, double> started;  // ... -> start
  std::vector<double> free_from(actions.size(), 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t d = 0; d < p; ++d) {
      std::vector<double>& starts = sim.start_s[d];
      while (starts.size() < actions[d].size()) {
        const PipelineAction& a = actions[d][starts.size()];
        const int64_t stage = a.chunk * p + d;
        EMBER_CHECK(stage < stages, "simulate_schedule: device ", d, " runs chunk ", a.chunk, ", stage ", stage,
                    ", of ", stages, " stages");
        double start = free_from[d];
        const int64_t from = a.backward ? stage + 1 : stage - 1;
        if (from >= 0 && from < stages) {
          auto it = done.find({from, a.micro_batch, a.backward});
          if (it == done.end()) break;  // its message is not sent yet
          start = std::max(start, it->second);
        }
        const StageCost& c = costs[static_cast<size_t>(stage)];
        const double end = start + (a.backward ? c.backward_s : c.forward_s);
        starts.push_back(start);
        sim.end_s[d].push_back(end);
        free_from[d] = end;
        done[{stage, a.micro_batch, a.backward}] = end;
        started[{stage, a.micro_batch, a.backward}] = start;
        sim.makespan_s = std::max(sim.makespan_s, end);
        progress = true;
      }
    }
  }
  std::ostringstream stuck;
  for (int64_t d = 0; d < p; ++d) {
    if (sim.start_s[d].size() == actions[d].size()) continue;
    const PipelineAction& a = actions[d][sim.start_s[d].size()];
    stuck << " device " << d << " at the " << (a.backward ? "backward" : "forward") << " of micro-batch "
          << a.micro_batch << " (chunk " << a.chunk << ");";
  }
  EMBER_CHECK(stuck.str().empty(), "simulate_schedule: the devices' action lists wait on each other:", stuck.str());
  // Per device, byte changes in time order (frees first at equal times): a forward takes its
  // stage's held bytes until its backward ends; a backward takes its extra while it runs; the
  // input gradient it sends stays on its device until the stage before starts that backward.
  double idle = 0;
  for (int64_t d = 0; d < p; ++d) {
    std::vector<std::tuple<double, int, int64_t>> changes;  // (time, 0 free / 1 take, bytes)
    int64_t held = 0, peak = 0;
    double busy = 0;
    for (size_t k = 0; k < actions[d].size(); ++k) {
      const PipelineAction& a = actions[d][k];
      const int64_t stage = a.chunk * p + d;
      const StageCost& c = costs[static_cast<size_t>(stage)];
      const double start = sim.start_s[d][k], end = sim.end_s[d][k];
      busy += end - start;
      if (!a.backward) {
        peak = std::max(peak, ++held);
        changes.emplace_back(start, 1, c.held_bytes);
        continue;
      }
      --held;
      changes.emplace_back(start, 1, c.backward_extra_bytes);
      changes.emplace_back(end, 0, -c.backward_extra_bytes - c.held_bytes);
      if (stage > 0 && c.input_bytes > 0) {
        changes.emplace_back(end, 1, c.input_bytes);
        changes.emplace_back(started.at({stage - 1, a.micro_batch, true}), 0, -c.input_bytes);
      }
    }
    std::sort(changes.begin(), changes.end());
    int64_t bytes = 0, peak_bytes = 0;
    for (const auto& [t, take, change] : changes) peak_bytes = std::max(peak_bytes, bytes += change);
    sim.peak_held_micro_batches.push_back(peak);
    sim.peak_held_bytes.push_back(peak_bytes);
    if (sim.makespan_s > 0) idle += 1.0 - busy / sim.makespan_s;
  }
  sim.bubble = idle / static_cast<double>(p);
  return sim;
}

}  // namespace ember::parallel
