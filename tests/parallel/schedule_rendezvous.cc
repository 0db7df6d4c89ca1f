// See schedule_rendezvous.h.
#include "tests/parallel/schedule_rendezvous.h"

#include <algorithm>
#include <sstream>

#include "core/ember_core.h"

namespace ember::testing {

namespace {

std::string action_name(const parallel::PipelineAction& a) {
  return detail::concat(a.backward ? "backward" : "forward", " of micro-batch ", a.micro_batch, " (chunk ", a.chunk,
                        ")");
}

}  // namespace

LogicalTimeline logical_timeline(const StageActions& actions) {
  int64_t chunks = 1;
  for (const auto& list : actions)
    for (const parallel::PipelineAction& a : list) chunks = std::max(chunks, a.chunk + 1);
  const std::vector<parallel::StageCost> unit(actions.size() * static_cast<size_t>(chunks), {1, 1, 0, 0});
  const parallel::SimulatedSchedule sim = parallel::simulate_schedule(actions, unit);
  LogicalTimeline timeline;
  timeline.makespan = static_cast<int64_t>(sim.makespan_s);
  for (const auto& starts : sim.start_s) {
    timeline.steps.emplace_back();
    for (double t : starts) timeline.steps.back().push_back(static_cast<int64_t>(t));
  }
  return timeline;
}

double logical_bubble(const StageActions& actions, const LogicalTimeline& timeline) {
  double idle = 0;
  for (const auto& stage : actions)
    idle += 1.0 - static_cast<double>(stage.size()) / static_cast<double>(timeline.makespan);
  return idle / static_cast<double>(actions.size());
}

ScheduleRendezvous::ScheduleRendezvous(parallel::Schedule schedule, int64_t devices, int64_t micro_batches,
                                       std::chrono::seconds bound, int64_t virtual_stages)
    : name_(detail::concat(parallel::schedule_name(schedule), " p=", devices, " v=", virtual_stages,
                           " m=", micro_batches)),
      bound_(bound) {
  actions_ = parallel::per_device_actions(schedule, devices, micro_batches, virtual_stages);
  timeline_ = logical_timeline(actions_);
  step_size_.assign(static_cast<size_t>(timeline_.makespan), 0);
  for (const auto& steps : timeline_.steps)
    for (int64_t t : steps) ++step_size_[static_cast<size_t>(t)];
  next_.assign(actions_.size(), 0);
  started_.assign(step_size_.size(), 0);
}

std::string ScheduleRendezvous::describe(int64_t device, size_t k) const {
  return detail::concat("device ", device, "'s ", action_name(actions_[device][k]), " (action ", k, ", step ",
                        timeline_.steps[device][k], ")");
}

void ScheduleRendezvous::arrive(int64_t stage, bool backward) {
  std::unique_lock<std::mutex> lock(mutex_);
  const int64_t p = static_cast<int64_t>(actions_.size()), device = stage % p, chunk = stage / p;
  const size_t k = next_.at(static_cast<size_t>(device));
  const char* kind = backward ? "backward" : "forward";
  EMBER_CHECK(k < actions_[device].size(), "schedule rendezvous (", name_, "): stage ", stage, " ran a ", kind,
              " after all ", actions_[device].size(), " actions of its device's schedule");
  EMBER_CHECK(actions_[device][k].backward == backward && actions_[device][k].chunk == chunk, "schedule rendezvous (",
              name_, "): stage ", stage, " ran a ", kind, " where its device's schedule has ", describe(device, k));
  ++next_[device];
  const int64_t step = timeline_.steps[device][k];
  ++started_[step];
  cv_.notify_all();
  cv_.wait_for(lock, bound_, [&] { return !gave_up_.empty() || started_[step] == step_size_[step]; });
  if (started_[step] == step_size_[step]) return;
  if (!gave_up_.empty())
    EMBER_FAIL("schedule rendezvous (", name_, "): ", describe(stage, k), " stopped waiting: ", gave_up_);
  std::ostringstream missing;
  for (size_t s = 0; s < actions_.size(); ++s)
    for (size_t j = next_[s]; j < actions_[s].size(); ++j)
      if (timeline_.steps[s][j] == step) missing << " " << describe(static_cast<int64_t>(s), j) << ";";
  gave_up_ = detail::concat(describe(stage, k), " waited ", bound_.count(), " s for the other actions of step ", step,
                            " to start, and these did not:", missing.str(),
                            " the pipeline does not run the schedule's concurrent actions at once");
  cv_.notify_all();
  EMBER_FAIL("schedule rendezvous (", name_, "): ", gave_up_);
}

RendezvousLayerImpl::RendezvousLayerImpl(int64_t stage, std::shared_ptr<ScheduleRendezvous> rendezvous)
    : Cloneable("RendezvousLayer"), stage(stage), rendezvous(std::move(rendezvous)) {
  reset();
}

void RendezvousLayerImpl::reset() { weight = register_parameter("weight", ones({})); }

Tensor RendezvousLayerImpl::forward(const Tensor& x) {
  rendezvous->arrive(stage, false);
  Tensor y = x * weight;
  if (y.requires_grad()) {
    y.register_hook([r = rendezvous, s = stage](const Tensor&) -> Tensor {
      r->arrive(s, true);
      return Tensor();
    });
  }
  return y;
}

}  // namespace ember::testing
