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
// run's save when it is newer.
std::string latest_checkpoint(const std::string& dir);
// The settings that shape a run's learning-rate schedule, saved with every checkpoint: the
// schedule spans the whole run, so a resumed run must have the same ones.
json::Value run_settings(const TrainConfig& config, int64_t steps_per_epoch);
// Fails naming the flags when `path` was saved by a run whose schedule settings or --amp differ
// (a checkpoint without an "amp" entry was saved in float32: --amp off).
void check_resume_settings(const std::string& path, const TrainConfig& config, int64_t steps_per_epoch);
// The epoch, step and loader position of a checkpoint file or sharded directory.
nn::TrainingState read_checkpoint_state(const std::string& path);
// Keeps the newest `keep` epoch checkpoints: removes every epoch-N file or directory in `dir` with N at or
// below current_epoch - keep, including ones left by earlier runs in the same directory.
void prune_checkpoints(const std::string& dir, int64_t current_epoch, int64_t keep);

}  // namespace ember::train
