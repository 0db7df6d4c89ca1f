// MultiStepLR: decays by gamma at each milestone.
#include "nn/optim/multi_step_lr.h"

#include <algorithm>
#include <cmath>

namespace ember::optim {

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler("MultiStepLR", optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::compute_lrs(int64_t epoch) {
  // PyTorch's base_lr * gamma ** bisect_right(sorted milestones, epoch).
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  const double factor = std::pow(gamma_, static_cast<double>(passed));
  std::vector<double> lrs;
  for (double base : base_lrs()) lrs.push_back(base * factor);
  return lrs;
}

void MultiStepLR::save_config(json::Value& object) const {
  json::Value milestones = json::Value::array();
  for (int64_t m : milestones_) milestones.items().push_back(json::Value::integer(m));
  object.set("milestones", std::move(milestones));
  object.set("gamma", json::Value::number(gamma_));
}

void MultiStepLR::load_config(const json::Value& object) {
  const std::string where = "MultiStepLR.load_state_dict";
  const json::Value& saved = json_member(object, "milestones", where);
  EMBER_CHECK(saved.is_array(), where, ": expected \"milestones\" to be an array, got ", saved.dump());
  std::vector<int64_t> milestones;
  for (const json::Value& m : saved.items()) {
    EMBER_CHECK(m.is_integer(), where, ": expected integer milestones, got ", saved.dump());
    milestones.push_back(m.as_int());
  }
  std::sort(milestones.begin(), milestones.end());
  milestones_ = std::move(milestones);
  gamma_ = json_number(object, "gamma", where);
}

}  // namespace ember::optim
