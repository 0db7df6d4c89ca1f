// A pipeline's schedule checked by events, not by time: with unit-cost actions a schedule gives
// each stage's actions logical steps, and stage layers that meet at every step (RendezvousLayer)
// can only get through a run whose stages run the actions of one step at the same time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nn/module.h"
#include "parallel/pipeline.h"

namespace ember::testing {

// Device d's actions in their order, for every device.
using StageActions = std::vector<std::vector<parallel::PipelineAction>>;

// Every action taking one step (parallel::simulate_schedule with unit costs): an action starts
// once its device's previous action and the action it receives from (a forward's input from stage
// s - 1, a backward's gradient from stage s + 1) have ended. steps[d][k] is when device d's k-th
// action starts; makespan, when the last ends.
struct LogicalTimeline {
  std::vector<std::vector<int64_t>> steps;
  int64_t makespan = 0;
};
// An Error naming the first action of each stuck stage when the lists wait on each other.
LogicalTimeline logical_timeline(const StageActions& actions);
// The mean over stages of 1 - busy / makespan.
double logical_bubble(const StageActions& actions, const LogicalTimeline& timeline);

// The schedule's actions of every stage, and the meeting point of the actions of each step.
class ScheduleRendezvous {
 public:
  ScheduleRendezvous(parallel::Schedule schedule, int64_t devices, int64_t micro_batches, std::chrono::seconds bound,
                     int64_t virtual_stages = 1);
  // At the start of stage s's next action, from its layer: an Error if its device's next action in
  // the schedule is not of this kind or of another chunk; otherwise waits until every action of its step has started. An
  // Error naming the actions that have not when `bound` passes first (the stages do not run them
  // at once), or when another stage gave up waiting.
  void arrive(int64_t stage, bool backward);

 private:
  std::string describe(int64_t device, size_t k) const;

  std::string name_;
  StageActions actions_;
  LogicalTimeline timeline_;
  std::vector<int64_t> step_size_;  // actions per step
  std::chrono::seconds bound_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<size_t> next_;      // per device: actions started so far
  std::vector<int64_t> started_;  // per step
  std::string gave_up_;
};

// y = x * w (a scalar parameter) as stage `stage` (one layer per stage), meeting the other
// devices at the start of each forward and each backward.
class RendezvousLayerImpl : public nn::Cloneable<RendezvousLayerImpl> {
 public:
  RendezvousLayerImpl(int64_t stage, std::shared_ptr<ScheduleRendezvous> rendezvous);
  void reset() override;
  Tensor forward(const Tensor& x) override;
  int64_t stage;
  std::shared_ptr<ScheduleRendezvous> rendezvous;
  Tensor weight;
};
EMBER_MODULE(RendezvousLayer);

}  // namespace ember::testing
