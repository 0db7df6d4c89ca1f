// LinearWarmup: the lr ramps linearly from start_factor * base_lr to base_lr over warmup_steps
// steps, then the wrapped schedule runs from its epoch 0. The same sequence as PyTorch's
// SequentialLR([LinearLR(start_factor, 1.0, warmup_steps), after], milestones=[warmup_steps]).
//
//   SGD sgd(params, SGDOptions(0.4).momentum(0.9));
//   LinearWarmup schedule(sgd, /*warmup_steps=*/5, /*start_factor=*/0.1,
//                         std::make_unique<MultiStepLR>(sgd, std::vector<int64_t>{100, 150}));
#pragma once

#include <memory>

#include "nn/optim/lr_scheduler.h"

namespace ember::optim {

class LinearWarmup : public LRScheduler {
 public:
  // `after` must schedule the same optimizer; null keeps base_lr after the warm-up.
  LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor,
               std::unique_ptr<LRScheduler> after = nullptr);
  int64_t warmup_steps() const { return warmup_steps_; }
  double start_factor() const { return start_factor_; }
  LRScheduler* after() const { return after_.get(); }

 protected:
  std::vector<double> compute_lrs(int64_t epoch) override;
  void save_config(json::Value& object) const override;
  void load_config(const json::Value& object) override;

 private:
  static void check_config(int64_t warmup_steps, double start_factor);

  int64_t warmup_steps_;
  double start_factor_;
  std::unique_ptr<LRScheduler> after_;
};

}  // namespace ember::optim
