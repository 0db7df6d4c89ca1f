// LRScheduler: stepping, writing lrs into the optimizer, and the state_dict shared by every schedule.
#include "nn/optim/lr_scheduler.h"

namespace ember::optim {

LRScheduler::LRScheduler(std::string name, Optimizer& optimizer) : name_(std::move(name)), optimizer_(optimizer) {
  for (const ParamGroup& group : optimizer_.param_groups()) base_lrs_.push_back(group.options().get_lr());
}

LRScheduler::~LRScheduler() = default;

void LRScheduler::step() { go_to(last_epoch_ + 1); }

void LRScheduler::go_to(int64_t epoch) {
  EMBER_CHECK(base_lrs_.size() == num_groups(), name_, ": the optimizer has ", num_groups(),
              " parameter groups but the schedule was made for ", base_lrs_.size(),
              " (add_param_group after the scheduler is not supported)");
  std::vector<double> lrs = compute_lrs(epoch);
  std::vector<ParamGroup>& groups = optimizer_.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(lrs[g]);
  last_lr_ = std::move(lrs);
  last_epoch_ = epoch;
}

StateDict LRScheduler::state_dict() const {
  StateDict out;
  out.json.set("scheduler", json::Value::string(name_));
  out.json.set("last_epoch", json::Value::integer(last_epoch_));
  out.json.set("base_lrs", json_array(base_lrs_));
  out.json.set("last_lr", json_array(last_lr_));
  save_config(out.json);
  return out;
}

void LRScheduler::load_state_dict(const StateDict& state) {
  const std::string where = name_ + ".load_state_dict";
  const json::Value& kind = json_member(state.json, "scheduler", where);
  EMBER_CHECK(kind.is_string() && kind.as_string() == name_, where, ": expected the state of a ", name_, ", got ",
              kind.dump());
  const int64_t epoch = json_int(state.json, "last_epoch", where);
  EMBER_CHECK(epoch >= 0, where, ": expected last_epoch >= 0, got ", epoch);
  std::vector<double> base_lrs = json_numbers(state.json, "base_lrs", where);
  EMBER_CHECK(base_lrs.size() == num_groups(), where, ": the saved schedule has ", base_lrs.size(),
              " parameter groups, the optimizer ", num_groups());
  load_config(state.json);
  base_lrs_ = std::move(base_lrs);
  go_to(epoch);
}

}  // namespace ember::optim
