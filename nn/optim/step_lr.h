// StepLR: lr = base_lr * gamma^(epoch / step_size) (integer division), as torch.optim.lr_scheduler.StepLR.
//
//   StepLR schedule(optimizer, /*step_size=*/30, /*gamma=*/0.1);   // 0.1 -> 0.01 at epoch 30 -> ...
#pragma once

#include "nn/optim/lr_scheduler.h"

namespace ember::optim {

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  int64_t step_size() const { return step_size_; }
  double gamma() const { return gamma_; }

 protected:
  std::vector<double> compute_lrs(int64_t epoch) override;
  void save_config(json::Value& object) const override;
  void load_config(const json::Value& object) override;

 private:
  int64_t step_size_;
  double gamma_;
};

}  // namespace ember::optim
