// The files of a run's checkpoints: their names, the newest one to resume from, the settings saved
// with each (and checked on resume), and pruning the old ones. The checkpoints' contents are
// nn/checkpoint.h's.
#pragma once

#include <cstdint>
#include <string>

#include "core/io/json.h"
#include "nn/checkpoint.h"
#include "tools/train/config.h"

namespace ember::train {

// <dir>/<name>.safetensors, or the directory <dir>/<name> of a sharded run's checkpoint.
std::string checkpoint_path(const std::string& dir, const std::string& name, bool sharded = false);
// The newest epoch-N checkpoint (file or sharded directory) in `dir`, preferring an interrupted
// run's save or a mid-epoch one (last, --checkpoint-every) when it is newer.
std::string latest_checkpoint(const std::string& dir);
// The settings that shape a run's learning-rate schedule, saved with every checkpoint: the
// schedule spans the whole run, so a resumed run must have the same ones.
json::Value run_settings(const TrainConfig& config, int64_t steps_per_epoch);
// Fails naming the flags when `path` was saved by a run whose schedule settings or --amp differ
// (a checkpoint without an "amp" entry was saved in float32: --amp off).
// The steps per epoch are compared only when the checkpoint's world size is this run's: at another
// one the trainer makes the schedule again for the new length.
void check_resume_settings(const std::string& path, const TrainConfig& config, int64_t steps_per_epoch, int world_size);
// Where a checkpoint stopped in its epoch, at any world size: the processes that saved it, and the
// examples of the epoch under way they had consumed (0 at an epoch's end). Files from before these
// were saved count as saved by `world_size` processes of --batch-size each.
struct SavedPosition {
  int world_size = 1;
  int64_t epoch_samples = 0;
  int64_t steps_per_epoch = 0;  // of the run that saved it (this run's when not recorded)
};
SavedPosition saved_position(const nn::TrainingState& state, const TrainConfig& config, int world_size,
                             int64_t steps_per_epoch);
// The epoch, step and loader position of a checkpoint file or sharded directory.
nn::TrainingState read_checkpoint_state(const std::string& path);
// Keeps the newest `keep` epoch checkpoints: removes every epoch-N file or directory in `dir` with N at or
// below current_epoch - keep, including ones left by earlier runs in the same directory.
void prune_checkpoints(const std::string& dir, int64_t current_epoch, int64_t keep);

}  // namespace ember::train
