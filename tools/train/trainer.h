// The training run behind `train`: datasets, model, optimizer, schedule, the epoch loop with
// evaluation, logging and checkpoints. The same code runs alone or under mpirun, and in every
// parallel mode: the mode's TrainStrategy (strategy.h) is the only difference; with more than one
// process the samplers shard the data.
#pragma once

#include <stdexcept>
#include <string>

#include "tools/train/config.h"

namespace ember::train {

// A dataset missing or unreadable at the start: `train` exits with kExitDataError (sysexits'
// EX_NOINPUT), which tools/launch, like bad flags (exit 2), does not restart.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
constexpr int kExitDataError = 66;

struct TrainResult {
  bool evaluated = true;     // false for an image folder without --val-dir (test_* stay 0)
  double test_accuracy = 0;  // over every test example, as a fraction
  double test_loss = 0;
  double train_seconds = 0;  // wall time of the whole run, evaluation included
  int64_t epochs = 0;        // epochs completed
  int64_t steps = 0;
  bool interrupted = false;  // stopped by Ctrl-C (a checkpoint was written)
  int rank = 0;
  int world_size = 1;
};

TrainResult run_training(const TrainConfig& config);

}  // namespace ember::train
