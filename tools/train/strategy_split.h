// What ModelParallel and Pipeline share: the model split into stages on cuda:0 to cuda:N-1 in one
// process (as_sequential's layers, so the bare model's state_dict keys), its input on the first
// stage's device (--device) and its logits on the last's.
#pragma once

#include "tools/train/strategy.h"

namespace ember::train {

class SplitStrategy : public TrainStrategy {
 public:
  SplitStrategy(const TrainConfig& config, const std::vector<std::string>& stage_names)
      : TrainStrategy(config), stages_(parse_devices(stage_names)) {}

  // The layers run only through the wrapper (they are on several devices), --eval-only too.
  EvalTarget eval_only_target() override { return evaluation_target(); }

  std::vector<Device> memory_devices() const override { return stages_; }

 protected:
  Device output_device() const override { return stages_.back(); }

  std::vector<Device> stages_;
};

}  // namespace ember::train
