// StepLR: a decay by gamma every step_size epochs.
#include "nn/optim/step_lr.h"

#include <cmath>

namespace ember::optim {

namespace {
void check_step_size(int64_t step_size) {
  EMBER_CHECK(step_size > 0, "StepLR: invalid step_size: expected > 0, got ", step_size);
}
}  // namespace

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler("StepLR", optimizer), step_size_(step_size), gamma_(gamma) {
  check_step_size(step_size);
  initial_step();
}

std::vector<double> StepLR::compute_lrs(int64_t epoch) {
  // PyTorch's base_lr * gamma ** (epoch // step_size), with Python's float power.
  const double factor = std::pow(gamma_, static_cast<double>(epoch / step_size_));
  std::vector<double> lrs;
  for (double base : base_lrs()) lrs.push_back(base * factor);
  return lrs;
}

void StepLR::save_config(json::Value& object) const {
  object.set("step_size", json::Value::integer(step_size_));
  object.set("gamma", json::Value::number(gamma_));
}

void StepLR::load_config(const json::Value& object) {
  const int64_t step_size = json_int(object, "step_size", "StepLR.load_state_dict");
  check_step_size(step_size);
  step_size_ = step_size;
  gamma_ = json_number(object, "gamma", "StepLR.load_state_dict");
}

}  // namespace ember::optim
