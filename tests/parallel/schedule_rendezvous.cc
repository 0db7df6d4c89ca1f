// See schedule_rendezvous.h.
#include "tests/parallel/schedule_rendezvous.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "core/ember_core.h"

namespace ember::testing {

namespace {

std::string action_name(const parallel::PipelineAction& a) {
  return detail::concat(a.backward ? "backward" : "forward", " of micro-batch ", a.micro_batch);
}

}  // namespace

LogicalTimeline logical_timeline(const StageActions& actions) {
  const int64_t p = static_cast<int64_t>(actions.size());
  LogicalTimeline timeline;
  timeline.steps.resize(actions.size());
  std::map<std::tuple<int64_t, int64_t, bool>, int64_t> end;  // (stage, micro-batch, backward) -> step
  std::vector<int64_t> free_from(actions.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < p; ++s) {
      std::vector<int64_t>& steps = timeline.steps[s];
      while (steps.size() < actions[s].size()) {
        const parallel::PipelineAction& a = actions[s][steps.size()];
        int64_t start = free_from[s];
        const int64_t from = a.backward ? s + 1 : s - 1;
        if (from >= 0 && from < p) {
          auto it = end.find({from, a.micro_batch, a.backward});
          if (it == end.end()) break;  // its message is not sent yet
          start = std::max(start, it->second);
        }
        steps.push_back(start);
        free_from[s] = start + 1;
        end[{s, a.micro_batch, a.backward}] = start + 1;
        timeline.makespan = std::max(timeline.makespan, start + 1);
        progress = true;
      }
    }
  }
  std::ostringstream stuck;
  for (int64_t s = 0; s < p; ++s)
    if (timeline.steps[s].size() < actions[s].size())
      stuck << " stage " << s << " at its " << action_name(actions[s][timeline.steps[s].size()]) << ";";
  EMBER_CHECK(stuck.str().empty(), "logical_timeline: the stages' action lists wait on each other:", stuck.str());
  return timeline;
}

double logical_bubble(const StageActions& actions, const LogicalTimeline& timeline) {
  double idle = 0;
  for (const auto& stage : actions)
    idle += 1.0 - static_cast<double>(stage.size()) / static_cast<double>(timeline.makespan);
  return idle / static_cast<double>(actions.size());
}

ScheduleRendezvous::ScheduleRendezvous(parallel::Schedule schedule, int64_t stages, int64_t micro_batches,
                                       std::chrono::seconds bound)
    : name_(detail::concat(parallel::schedule_name(schedule), " p=", stages, " m=", micro_batches)), bound_(bound) {
  for (int64_t s = 0; s < stages; ++s)
    actions_.push_back(parallel::schedule_actions(schedule, s, stages, micro_batches));
  timeline_ = logical_timeline(actions_);
  step_size_.assign(static_cast<size_t>(timeline_.makespan), 0);
  for (const auto& steps : timeline_.steps)
    for (int64_t t : steps) ++step_size_[static_cast<size_t>(t)];
  next_.assign(actions_.size(), 0);
  started_.assign(step_size_.size(), 0);
}

std::string ScheduleRendezvous::describe(int64_t stage, size_t k) const {
  return detail::concat("stage ", stage, "'s ", action_name(actions_[stage][k]), " (action ", k, ", step ",
                        timeline_.steps[stage][k], ")");
}

void ScheduleRendezvous::arrive(int64_t stage, bool backward) {
  std::unique_lock<std::mutex> lock(mutex_);
  const size_t k = next_.at(static_cast<size_t>(stage));
  EMBER_CHECK(k < actions_[stage].size(), "schedule rendezvous (", name_, "): stage ", stage, " ran a ",
              backward ? "backward" : "forward", " after all ", actions_[stage].size(), " actions of its schedule");
  EMBER_CHECK(actions_[stage][k].backward == backward, "schedule rendezvous (", name_, "): stage ", stage, " ran a ",
              backward ? "backward" : "forward", " where its schedule has ", describe(stage, k));
  ++next_[stage];
  const int64_t step = timeline_.steps[stage][k];
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
