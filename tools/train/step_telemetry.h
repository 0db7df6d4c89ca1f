// The figures the train tool logs with every step record besides loss and rate (metrics.jsonl and
// TensorBoard; docs/API.md lists them), measured every step at little cost:
//   grad_norm               the L2 norm of the gradients the optimizer stepped with (all ranks'
//                           shards together under --shard-stage)
//   data_wait_share         the share of the window's time spent waiting for the data loader
//   exposed_comm_ms         per step, the time backward's end waited for gradient all-reduces
//                           (the part not hidden behind backward), on rank 0
//   peak_memory_mb/rankN    each rank's peak bytes on its device since the start (MiB)
// and the slow-rank check: all ranks' busy time (a step less its exposed communication) is shared
// every step in the all-reduce the trainer makes anyway, and a rank 20% above the median for 10
// steps in a row is named on rank 0's output and in a "slow_rank" record.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "nn/module.h"
#include "tools/train/slow_ranks.h"

namespace ember::train {

class StepTelemetry {
 public:
  explicit StepTelemetry(int world_size) : slow_(world_size), peaks_mb_(static_cast<size_t>(world_size), 0) {}

  void data_waited(double seconds) { wait_seconds_ += seconds; }
  // `step_seconds`: the step's own time, data wait not included.
  void step_done(double step_seconds, double exposed_comm_seconds);
  // This step's busy seconds and this rank's peak memory (MiB) at `rank`'s slots of a vector of
  // 2 x world_size values that the ranks sum.
  std::vector<double> shared_slots(int rank, const std::vector<Device>& devices) const;
  // The summed vector back (anything after its 2 x world_size values is the caller's): returns
  // the ranks newly named slow at this step.
  std::vector<int> observe_shared(const std::vector<double>& summed);
  double median_busy_seconds() const { return slow_.median(); }
  double busy_seconds_of(int rank) const { return busy_[static_cast<size_t>(rank)]; }
  // The window's figures since the last call, into `values`; restarts the window.
  void take_window(std::map<std::string, double>& values);

 private:
  SlowRankDetector slow_;
  double wait_seconds_ = 0, step_seconds_ = 0, exposed_seconds_ = 0, last_busy_ = 0;
  int64_t steps_ = 0;
  std::vector<double> busy_, peaks_mb_;
};

// The L2 norm of `parameters`' gradients; with `shards_of`, each rank holds a shard of them and
// the squares are summed over that group first.
double gradient_norm(const std::vector<Tensor>& parameters, comm::ProcessGroup* shards_of, Device device);

// The most bytes allocated at once on `device` since the start, as its backend counts them
// (DeviceRuntime::peak_allocated_bytes; 0 for a backend that does not).
int64_t peak_memory_bytes(Device device);

}  // namespace ember::train
