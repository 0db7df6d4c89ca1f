// CosineAnnealingLR: lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, as
// torch.optim.lr_scheduler.CosineAnnealingLR (no restarts: past T_max the cosine climbs back).
//
//   CosineAnnealingLR schedule(optimizer, /*T_max=*/200, /*eta_min=*/0.0);
#pragma once

#include "nn/optim/lr_scheduler.h"

namespace ember::optim {

class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);  // NOLINT: PyTorch's names
  int64_t T_max() const { return T_max_; }
  double eta_min() const { return eta_min_; }

 protected:
  std::vector<double> compute_lrs(int64_t epoch) override;
  void save_config(json::Value& object) const override;
  void load_config(const json::Value& object) override;

 private:
  int64_t T_max_;
  double eta_min_;
};

}  // namespace ember::optim
