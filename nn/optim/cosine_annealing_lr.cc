// CosineAnnealingLR: half a cosine from base_lr down to eta_min over T_max epochs.
#include "nn/optim/cosine_annealing_lr.h"

#include <cmath>

namespace ember::optim {

namespace {
constexpr double kPi = 3.141592653589793;  // math.pi

void check_t_max(int64_t T_max) {
  EMBER_CHECK(T_max > 0, "CosineAnnealingLR: invalid T_max: expected > 0, got ", T_max);
}
}  // namespace

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler("CosineAnnealingLR", optimizer), T_max_(T_max), eta_min_(eta_min) {
  check_t_max(T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::compute_lrs(int64_t epoch) {
  // The operations in the order of PyTorch's closed form, so the rounding is the same.
  const double cosine = 1.0 + std::cos(kPi * static_cast<double>(epoch) / static_cast<double>(T_max_));
  std::vector<double> lrs;
  for (double base : base_lrs()) lrs.push_back(eta_min_ + (base - eta_min_) * cosine / 2.0);
  return lrs;
}

void CosineAnnealingLR::save_config(json::Value& object) const {
  object.set("T_max", json::Value::integer(T_max_));
  object.set("eta_min", json::Value::number(eta_min_));
}

void CosineAnnealingLR::load_config(const json::Value& object) {
  const int64_t T_max = json_int(object, "T_max", "CosineAnnealingLR.load_state_dict");
  check_t_max(T_max);
  T_max_ = T_max;
  eta_min_ = json_number(object, "eta_min", "CosineAnnealingLR.load_state_dict");
}

}  // namespace ember::optim
