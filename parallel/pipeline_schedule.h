// Pipeline schedules as data: each device's ordered list of forward/backward actions, and a
// simulator that times those lists from per-stage costs (pure functions; no tensors).
//
// The model is split into p * v contiguous stages ("virtual stages"); device d holds stages d,
// d + p, d + 2p, ... (its chunks 0 .. v-1). v is 1 except for the interleaved schedule.
//
//   auto lists = per_device_actions(Schedule::kInterleaved1F1B, /*devices=*/4, /*micro_batches=*/8, 2);
//   SimulatedSchedule sim = simulate_schedule(lists, costs);  // costs: one per stage, p * v of them
//   sim.makespan_s, sim.peak_held_bytes[d]
#pragma once

#include <cstdint>
#include <vector>

namespace ember::parallel {

// kAuto measures the stages and picks one of the others (parallel/pipeline_auto.h).
enum class Schedule { kGPipe, k1F1B, kInterleaved1F1B, kAuto };
const char* schedule_name(Schedule schedule);

// One step of a device: micro-batch `micro_batch`'s forward or backward through its chunk
// `chunk`, which is stage chunk * p + device.
struct PipelineAction {
  int64_t micro_batch = 0;
  bool backward = false;
  int64_t chunk = 0;
};

// Device `device`'s actions in order, for `micro_batches` micro-batches over `devices` devices
// holding `virtual_stages` chunks each:
//   GPipe: every forward (chunk by chunk), then every backward in the reverse order; any v.
//   1F1B: min(p - 1 - d, m) warm-up forwards, then one forward and one backward in turn; v = 1.
//   interleaved 1F1B (Megatron-LM's): v >= 2; micro-batches in groups of p, each group's forwards
//     chunk by chunk (backwards chunk v-1 first); 2 (p - 1 - d) + (v - 1) p warm-up forwards.
//     When p does not divide m, the lists of the next multiple of p without the extra micro-batches.
// Errors name the schedule and what it needs.
std::vector<PipelineAction> schedule_actions(Schedule schedule, int64_t device, int64_t devices, int64_t micro_batches,
                                             int64_t virtual_stages = 1);
// schedule_actions for every device.
std::vector<std::vector<PipelineAction>> per_device_actions(Schedule schedule, int64_t devices, int64_t micro_batches,
                                                            int64_t virtual_stages = 1);

// What one micro-batch costs at one stage.
struct StageCost {
  double forward_s = 0, backward_s = 0;
  // Held from the start of its forward to the end of its backward (saved tensors and output).
  int64_t held_bytes = 0;
  // Allocated on top of what is held while its backward runs (gradients).
  int64_t backward_extra_bytes = 0;
  // The gradient of its input, sent back: held on its device until the stage before takes it.
  int64_t input_bytes = 0;
};

struct SimulatedSchedule {
  double makespan_s = 0;
  // [device][k]: when the device's k-th action starts and ends. An action starts once the
  // device's previous action has ended and its input has: a forward's from the stage before,
  // a backward's gradient from the stage after (messages cost nothing).
  std::vector<std::vector<double>> start_s, end_s;
  std::vector<int64_t> peak_held_micro_batches;  // per device: (stage, micro-batch) pairs held at once
  std::vector<int64_t> peak_held_bytes;          // per device, over the timeline, all of StageCost's bytes
  double bubble = 0;                             // mean over devices of 1 - busy / makespan
};

// Times the lists (`actions[d]`, stage of an action: chunk * p + d) with `costs[stage]`. An Error
// naming each stuck device's next action when the lists wait on each other (a run would hang).
SimulatedSchedule simulate_schedule(const std::vector<std::vector<PipelineAction>>& actions,
                                    const std::vector<StageCost>& costs);

}  // namespace ember::parallel
