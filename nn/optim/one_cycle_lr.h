// OneCycleLR: the 1cycle policy, as torch.optim.lr_scheduler.OneCycleLR. The lr climbs from
// max_lr / div_factor to max_lr over pct_start of total_steps, then anneals to
// max_lr / (div_factor * final_div_factor); with three_phase it first returns to the start, then
// anneals. With cycle_momentum, SGD's momentum (or Adam's beta1) moves inversely between
// max_momentum and base_momentum. Step it once per batch; stepping past total_steps raises.
//
//   OneCycleLR schedule(sgd, /*max_lr=*/0.4, /*total_steps=*/epochs * batches_per_epoch,
//                       OneCycleLROptions().anneal_strategy(AnnealStrategy::Linear));
#pragma once

#include <vector>

#include "nn/optim/lr_scheduler.h"

namespace ember::optim {

enum class AnnealStrategy { Cos, Linear };

struct OneCycleLROptions {
  EMBER_ARG(double, pct_start) = 0.3;
  EMBER_ARG(AnnealStrategy, anneal_strategy) = AnnealStrategy::Cos;
  EMBER_ARG(bool, cycle_momentum) = true;
  EMBER_ARG(double, base_momentum) = 0.85;
  EMBER_ARG(double, max_momentum) = 0.95;
  EMBER_ARG(double, div_factor) = 25.0;
  EMBER_ARG(double, final_div_factor) = 1e4;
  EMBER_ARG(bool, three_phase) = false;
};

class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleLROptions options = {});
  // One max_lr per parameter group.
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps, OneCycleLROptions options = {});
  const OneCycleLROptions& options() const { return options_; }
  int64_t total_steps() const { return total_steps_; }

 protected:
  std::vector<double> compute_lrs(int64_t epoch) override;
  void save_config(json::Value& object) const override;
  void load_config(const json::Value& object) override;

 private:
  void check_config() const;

  std::vector<double> max_lrs_;
  int64_t total_steps_;
  OneCycleLROptions options_;
};

}  // namespace ember::optim
