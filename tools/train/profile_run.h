// --profile DIR: a profiler::Session (core/profiler.h) over the steps of --profile-steps; then
// DIR/trace.rank<N>.json from every rank and DIR/trace.json with all ranks from rank 0 (the ranks'
// traces are gathered over the process group, so DIR need not be shared between hosts).
#pragma once

#include <memory>
#include <string>

#include "comm/process_group.h"
#include "core/device.h"
#include "core/profiler.h"
#include "tools/train/config.h"

namespace ember::train {

class ProfileRun {
 public:
  ProfileRun(const TrainConfig& config, std::shared_ptr<comm::ProcessGroup> world, Device device, int rank);
  // Before this run's step `run_step` (counted from 1): starts recording at the first profiled one.
  void before_step(int64_t run_step);
  // After it: at the last profiled step, stops and writes. Every rank calls these at the same
  // steps, since writing gathers the traces (a collective).
  void after_step(int64_t run_step);
  // When training ends: writes what was recorded, if it ended inside the profiled steps.
  void finish();

 private:
  void write();

  const TrainConfig& config_;
  std::shared_ptr<comm::ProcessGroup> world_;
  Device device_;
  int rank_;
  std::unique_ptr<profiler::Session> session_;
};

}  // namespace ember::train
