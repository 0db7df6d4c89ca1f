// One process on one device (--device), the model unwrapped: the base class as it is.
#include "tools/train/strategy.h"

namespace ember::train {

std::unique_ptr<TrainStrategy> make_single_device_strategy(const TrainConfig& config) {
  return std::make_unique<TrainStrategy>(config);
}

}  // namespace ember::train
