// The schedule simulator: a device's actions run in list order, each once its input is in. It
// sweeps the devices until none can start another action; what is left then waits on a cycle.
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
  std::map<std::tuple<int64_t, int64_t, bool>, double> done;  // (stage, micro-batch, backward) -> end
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
  // Memory follows each device's own order: a forward takes its stage's bytes until the backward.
  double idle = 0;
  for (int64_t d = 0; d < p; ++d) {
    int64_t held = 0, held_bytes = 0, peak = 0, peak_bytes = 0;
    double busy = 0;
    for (size_t k = 0; k < actions[d].size(); ++k) {
      const PipelineAction& a = actions[d][k];
      const StageCost& c = costs[static_cast<size_t>(a.chunk * p + d)];
      busy += sim.end_s[d][k] - sim.start_s[d][k];
      if (a.backward) {
        peak_bytes = std::max(peak_bytes, held_bytes + c.backward_extra_bytes);
        --held;
        held_bytes -= c.held_bytes;
      } else {
        peak = std::max(peak, ++held);
        held_bytes += c.held_bytes;
        peak_bytes = std::max(peak_bytes, held_bytes);
      }
    }
    sim.peak_held_micro_batches.push_back(peak);
    sim.peak_held_bytes.push_back(peak_bytes);
    if (sim.makespan_s > 0) idle += 1.0 - busy / sim.makespan_s;
  }
  sim.bubble = idle / static_cast<double>(p);
  return sim;
}

}  // namespace ember::parallel
