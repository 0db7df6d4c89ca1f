// LinearWarmup: a linear ramp of the lr, then the wrapped schedule shifted by warmup_steps.
#include "nn/optim/linear_warmup.h"

#include <algorithm>

namespace ember::optim {

LinearWarmup::LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor,
                           std::unique_ptr<LRScheduler> after)
    : LRScheduler("LinearWarmup", optimizer),
      warmup_steps_(warmup_steps),
      start_factor_(start_factor),
      after_(std::move(after)) {
  check_config(warmup_steps, start_factor);
  if (after_) {
    EMBER_CHECK(&after_->optimizer() == &optimizer,
                "LinearWarmup: the wrapped schedule must drive the same optimizer as the warm-up");
    // The wrapped schedule already moved the groups to its epoch 0; its base lrs are the originals.
    set_base_lrs(after_->base_lrs());
  }
  initial_step();
}

void LinearWarmup::check_config(int64_t warmup_steps, double start_factor) {
  EMBER_CHECK(warmup_steps >= 0, "LinearWarmup: invalid warmup_steps: expected >= 0, got ", warmup_steps);
  EMBER_CHECK(start_factor >= 0.0 && start_factor <= 1.0,
              "LinearWarmup: invalid start_factor: expected in [0, 1], got ", start_factor);
}

std::vector<double> LinearWarmup::compute_lrs(int64_t epoch) {
  if (epoch >= warmup_steps_) {
    if (after_) {
      after_->go_to(epoch - warmup_steps_);
      return after_->get_last_lr();
    }
    return base_lrs();
  }
  // LinearLR's closed form with end_factor 1, in PyTorch's order of operations.
  const double factor = start_factor_ + (1.0 - start_factor_) * static_cast<double>(std::min(warmup_steps_, epoch)) /
                                            static_cast<double>(warmup_steps_);
  std::vector<double> lrs;
  for (double base : base_lrs()) lrs.push_back(base * factor);
  return lrs;
}

void LinearWarmup::save_config(json::Value& object) const {
  object.set("warmup_steps", json::Value::integer(warmup_steps_));
  object.set("start_factor", json::Value::number(start_factor_));
  object.set("after", after_ ? after_->state_dict().json : json::Value::null());
}

void LinearWarmup::load_config(const json::Value& object) {
  const std::string where = "LinearWarmup.load_state_dict";
  const int64_t warmup_steps = json_int(object, "warmup_steps", where);
  const double start_factor = json_number(object, "start_factor", where);
  check_config(warmup_steps, start_factor);
  const json::Value& after = json_member(object, "after", where);
  EMBER_CHECK((after.kind() == json::Value::Kind::Null) == (after_ == nullptr), where,
              after_ ? ": the saved warm-up wraps no schedule, this one does"
                     : ": the saved warm-up wraps a schedule, this one does not");
  if (after_) {
    StateDict wrapped;
    wrapped.json = after;
    after_->load_state_dict(wrapped);
  }
  warmup_steps_ = warmup_steps;
  start_factor_ = start_factor;
}

}  // namespace ember::optim
