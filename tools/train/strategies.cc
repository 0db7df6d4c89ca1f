// The parallel modes, one file each (strategy_<mode>.cc). Adding a mode: its file, and its factory
// declared and listed here. A factory returns null when the config does not ask for its mode.
#include "tools/train/strategy.h"

namespace ember::train {

std::unique_ptr<TrainStrategy> make_model_parallel_strategy(const TrainConfig& config);
std::unique_ptr<TrainStrategy> make_pipeline_strategy(const TrainConfig& config);
std::unique_ptr<TrainStrategy> make_data_parallel_strategy(const TrainConfig& config);
std::unique_ptr<TrainStrategy> make_ddp_strategy(const TrainConfig& config);
std::unique_ptr<TrainStrategy> make_single_device_strategy(const TrainConfig& config);

std::unique_ptr<TrainStrategy> make_strategy(const TrainConfig& config) {
  // Tried in order; the one-process modes before DDP, which any launch selects, and the single
  // device last, which selects every config.
  using Factory = std::unique_ptr<TrainStrategy> (*)(const TrainConfig&);
  static constexpr Factory kModes[] = {
      make_model_parallel_strategy, make_pipeline_strategy, make_data_parallel_strategy, make_ddp_strategy,
      make_single_device_strategy,
  };
  for (Factory make : kModes)
    if (std::unique_ptr<TrainStrategy> strategy = make(config)) return strategy;
  EMBER_CHECK(false, "train: no parallel mode accepts this configuration");
  return nullptr;
}

}  // namespace ember::train
