// MultiStepLR: lr = base_lr * gamma^(number of milestones <= epoch), as
// torch.optim.lr_scheduler.MultiStepLR; a milestone listed twice decays twice.
//
//   MultiStepLR schedule(optimizer, {100, 150}, 0.1);   // the CIFAR ResNet schedule
#pragma once

#include <vector>

#include "nn/optim/lr_scheduler.h"

namespace ember::optim {

class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);
  const std::vector<int64_t>& milestones() const { return milestones_; }  // sorted
  double gamma() const { return gamma_; }

 protected:
  std::vector<double> compute_lrs(int64_t epoch) override;
  void save_config(json::Value& object) const override;
  void load_config(const json::Value& object) override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

}  // namespace ember::optim
