// LRScheduler: the base of the learning-rate schedules (StepLR, MultiStepLR, CosineAnnealingLR,
// OneCycleLR, LinearWarmup). Each computes the lr of every parameter group in closed form from
// the epoch count (PyTorch's _get_closed_form_lr), so a resumed schedule continues exactly; values
// agree with PyTorch's recursive step() to rounding. Call step() after optimizer.step(). A schedule
// holds a reference to its optimizer, which must outlive it.
//
//   SGD sgd(params, SGDOptions(0.1).momentum(0.9));
//   CosineAnnealingLR schedule(sgd, /*T_max=*/100);
//   for (int epoch = 0; epoch < 100; ++epoch) { train_one_epoch(sgd); schedule.step(); }
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/optim/optimizer.h"
#include "nn/optim/state_dict.h"

namespace ember::optim {

class LRScheduler {
 public:
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;
  virtual ~LRScheduler();

  // Advances one epoch (or iteration) and writes the new lrs into the optimizer's groups.
  void step();
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }  // 0 right after construction
  // Each group's lr at construction (PyTorch's initial_lr), the starting point of the schedule.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  Optimizer& optimizer() const { return optimizer_; }
  const std::string& name() const { return name_; }

  // JSON only: {"scheduler": name, "last_epoch", "base_lrs", "last_lr", and the configuration}.
  StateDict state_dict() const;
  // Restores the epoch and configuration of the same kind of scheduler, then writes that epoch's
  // lrs (and OneCycleLR's momentum) into the optimizer, so the next step() continues the sequence.
  void load_state_dict(const StateDict& state);

 protected:
  // base_lrs: the groups' current lrs.
  LRScheduler(std::string name, Optimizer& optimizer);
  // Derived constructors end with this: it moves to epoch 0, as PyTorch's constructor does.
  void initial_step() { go_to(0); }
  // The lr of each group at `epoch`. May also set other hyper-parameters of the groups (OneCycleLR's
  // momentum); raises for an epoch the schedule does not cover.
  virtual std::vector<double> compute_lrs(int64_t epoch) = 0;
  // The subclass's configuration, into and out of the state_dict object.
  virtual void save_config(json::Value& object) const = 0;
  virtual void load_config(const json::Value& object) = 0;
  void set_base_lrs(std::vector<double> base_lrs) { base_lrs_ = std::move(base_lrs); }
  size_t num_groups() const { return optimizer_.param_groups().size(); }
  // Moves to `epoch`: computes its lrs, writes them into the groups and records them.
  void go_to(int64_t epoch);

 private:
  friend class LinearWarmup;  // drives the schedule it wraps through go_to

  std::string name_;
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
};

}  // namespace ember::optim
