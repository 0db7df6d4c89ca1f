// The parallel modes, one file each (strategy_<mode>.cc, defining make_<mode>_strategy). Adding a
// mode: its file, and its name in this list. A factory returns null when the config does not ask
// for its mode; they are tried in the list's order: the one-process modes before the sharded one and DDP, which any
// launch selects, and the single device last, which selects every config.
#include "tools/train/strategy.h"

#define EMBER_TRAIN_MODES(X) X(model_parallel) X(pipeline) X(data_parallel) X(sharded) X(ddp) X(single_device)

namespace ember::train {

#define EMBER_DECLARE_MODE(mode) std::unique_ptr<TrainStrategy> make_##mode##_strategy(const TrainConfig& config);
EMBER_TRAIN_MODES(EMBER_DECLARE_MODE)
#undef EMBER_DECLARE_MODE

std::unique_ptr<TrainStrategy> make_strategy(const TrainConfig& config) {
  using Factory = std::unique_ptr<TrainStrategy> (*)(const TrainConfig&);
#define EMBER_LIST_MODE(mode) make_##mode##_strategy,
  static constexpr Factory kModes[] = {EMBER_TRAIN_MODES(EMBER_LIST_MODE)};
#undef EMBER_LIST_MODE
  for (Factory make : kModes)
    if (std::unique_ptr<TrainStrategy> strategy = make(config)) return strategy;
  EMBER_CHECK(false, "train: no parallel mode accepts this configuration");
  return nullptr;
}

}  // namespace ember::train
