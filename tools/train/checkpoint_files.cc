// Naming, finding, checking and pruning a run's checkpoint files.
#include "tools/train/checkpoint_files.h"

#include <filesystem>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "nn/checkpoint.h"
#include "parallel/sharded_checkpoint.h"

namespace ember::train {

namespace {

std::string describe_settings(const json::Value& run) {
  auto text = [&](const char* key) {
    const json::Value* v = run.find(key);
    if (!v) return std::string("?");
    if (v->is_string()) return v->as_string();
    if (v->is_integer()) return v->dump();
    std::ostringstream shortest;  // 0.1, not the exact dump's 0.10000000000000001
    shortest << v->as_double();
    return shortest.str();
  };
  return "--optimizer " + text("optimizer") + " --schedule " + text("schedule") + " --lr " + text("lr") + " --epochs " +
         text("epochs") + " (" + text("steps_per_epoch") + " steps per epoch)";
}

}  // namespace

std::string checkpoint_path(const std::string& dir, const std::string& name, bool sharded) {
  return dir + "/" + name + (sharded ? "" : ".safetensors");
}

nn::TrainingState read_checkpoint_state(const std::string& path) {
  return parallel::is_sharded_checkpoint(path) ? parallel::read_sharded_training_state(path)
                                               : nn::read_training_state(path);
}

// The newest epoch-N checkpoint in `dir`, preferring an interrupted run's save or a mid-epoch one
// (--checkpoint-every) when it is newer.
std::string latest_checkpoint(const std::string& dir) {
  std::string best;
  std::filesystem::file_time_type newest;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!std::regex_match(name, std::regex("(epoch-[0-9]+|interrupted|last)(\\.safetensors)?"))) continue;
    if (entry.is_directory() && !parallel::is_sharded_checkpoint(entry.path().string())) continue;
    auto time = entry.last_write_time();
    if (best.empty() || time > newest) {
      best = entry.path().string();
      newest = time;
    }
  }
  EMBER_CHECK(!best.empty(), "--resume latest: no checkpoint (epoch-N.safetensors, or a sharded run's epoch-N) in '",
              dir, "'");
  return best;
}

// The settings that shape a run's learning-rate schedule, saved with every checkpoint: the
// schedule spans the whole run, so a resumed run must have the same ones.
json::Value run_settings(const TrainConfig& config, int64_t steps_per_epoch) {
  json::Value run = json::Value::object();
  run.set("optimizer", json::Value::string(config.optimizer));
  run.set("schedule", json::Value::string(config.schedule));
  run.set("lr", json::Value::number(config.lr));
  run.set("epochs", json::Value::integer(config.epochs));
  run.set("steps_per_epoch", json::Value::integer(steps_per_epoch));
  return run;
}

// Fails naming the flags when `path` was saved by a run whose --amp or schedule settings differ
// from this one's (before, the scheduler's own load failed, or silently kept the saved length).
void check_resume_settings(const std::string& path, const TrainConfig& config, int64_t steps_per_epoch,
                           int world_size) {
  const nn::TrainingState saved = read_checkpoint_state(path);
  // A float16 run's checkpoint holds its gradient scaler, which no other run has or expects; and
  // a resumed run that changed precision would not continue the saved one.
  const json::Value* amp = saved.extra.find("amp");
  const std::string saved_amp = amp && amp->is_string() ? amp->as_string() : "off";
  EMBER_CHECK(saved_amp == config.amp, "--resume ", path, ": the checkpoint was saved by a run with --amp ", saved_amp,
              ", this run has --amp ", config.amp, "; resume with --amp ", saved_amp,
              ", or start a new run without --resume");
  const json::Value* run = saved.extra.find("run");
  if (!run) return;  // a checkpoint from before run settings were saved: the load checks what it can
  const json::Value mine = run_settings(config, steps_per_epoch);
  const bool same_world = saved_position(saved, config, world_size, steps_per_epoch).world_size == world_size;
  const std::pair<const char*, const char*> settings[] = {
      {"optimizer", "--optimizer"},
      {"schedule", "--schedule"},
      {"lr", "--lr"},
      {"epochs", "--epochs"},
      {"steps_per_epoch", "steps per epoch (from --batch-size, the dataset and the process count)"}};
  std::string differences;
  for (const auto& [key, label] : settings) {
    const json::Value* theirs = run->find(key);
    if (theirs && theirs->dump() == mine.find(key)->dump()) continue;
    if (!same_world && std::string(key) == "steps_per_epoch") continue;
    differences += (differences.empty() ? "" : ", ") + std::string(label);
  }
  EMBER_CHECK(differences.empty(), "--resume ", path, ": the checkpoint was saved by a run with ",
              describe_settings(*run), ", this run has ", describe_settings(mine), "; they differ in ", differences,
              ". The learning-rate schedule spans the whole run, so resume with the checkpoint's settings, or "
              "start a new run without --resume");
}

SavedPosition saved_position(const nn::TrainingState& state, const TrainConfig& config, int world_size,
                             int64_t steps_per_epoch) {
  SavedPosition position;
  const json::Value* world = state.extra.find("world_size");
  position.world_size = world ? static_cast<int>(world->as_int()) : world_size;
  const json::Value* samples = state.extra.find("epoch_samples");
  position.epoch_samples = samples
                               ? samples->as_int()
                               : state.loader_batches * config.batch_size * static_cast<int64_t>(position.world_size);
  const json::Value* run = state.extra.find("run");
  const json::Value* steps = run ? run->find("steps_per_epoch") : nullptr;
  position.steps_per_epoch = steps ? steps->as_int() : steps_per_epoch;
  return position;
}

// Keeps the newest `keep` epoch checkpoints: removes every epoch-N file in `dir` with N at or
// below current_epoch - keep, including ones left by earlier runs in the same directory.
void prune_checkpoints(const std::string& dir, int64_t current_epoch, int64_t keep) {
  const int64_t oldest_kept = current_epoch - keep + 1;
  std::error_code ec;
  std::vector<std::filesystem::path> doomed;
  const std::regex pattern("epoch-([0-9]+)(\\.safetensors)?");
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, match, pattern) && std::stoll(match[1].str()) < oldest_kept)
      doomed.push_back(entry.path());
  }
  for (const auto& path : doomed) std::filesystem::remove_all(path, ec);
}

}  // namespace ember::train
