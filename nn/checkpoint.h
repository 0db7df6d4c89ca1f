// Training checkpoints: model, optimizer, LR schedule, epoch/step, the random generator, the data
// loader's position, the gradient scaler (nn/amp/grad_scaler.h) and the kernel decisions in force
// (core/kernel_select.h) in one safetensors file, written atomically (temp file, fsync, rename)
// and validated on load. A run resumed from it continues bit for bit: load_checkpoint adopts the
// decisions, so benchmark mode's trials cannot pick other kernels for the problems the saved run
// had met.
//
//   nn::TrainingState state{epoch, step, loader.state().epoch, loader.state().batches};
//   nn::save_checkpoint("ckpt/last.safetensors", *model, &optimizer, &schedule, state);
//   ...
//   nn::TrainingState resumed = nn::load_checkpoint("ckpt/last.safetensors", *model, &optimizer, &schedule);
#pragma once

#include <map>
#include <string>

#include "core/io/json.h"
#include "core/random.h"
#include "nn/amp/grad_scaler.h"
#include "nn/module.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/optimizer.h"

namespace ember::nn {

struct TrainingState {
  int64_t epoch = 0;         // epochs completed
  int64_t step = 0;          // optimizer steps taken
  int64_t loader_epoch = 0;  // the data loader's position (data::LoaderState)
  int64_t loader_batches = 0;
  json::Value extra = json::Value::object();  // anything else the caller wants back (best accuracy, ...)
  // Read back only: the kernel decisions (key -> candidate) in force when the file was saved, which
  // save_checkpoint takes from kernel_select::in_force() itself. Empty for older files.
  std::map<std::string, std::string> kernels;
};

// `optimizer`, `scheduler`, `generator` and `scaler` may be null (not saved). Model keys are the
// module's state_dict keys under "model.", optimizer tensors under "optimizer."; the rest is JSON
// in the header metadata under "ember.checkpoint" (the scaler's state_dict() under "grad_scaler").
void save_checkpoint(const std::string& path, const Module& model, const optim::Optimizer* optimizer,
                     const optim::LRScheduler* scheduler, const TrainingState& state,
                     const Generator* generator = &default_generator(), const amp::GradScaler* scaler = nullptr);

// Restores everything given (strictly: every model key must match), adopts the saved kernel
// decisions (kernel_select::adopt) and returns the state. A file from another run shape
// (different model, missing optimizer state) raises naming the part, before anything changes.
TrainingState load_checkpoint(const std::string& path, Module& model, optim::Optimizer* optimizer,
                              optim::LRScheduler* scheduler, Generator* generator = &default_generator(),
                              amp::GradScaler* scaler = nullptr);

// The epoch/step/loader position and `extra` of a checkpoint, restoring nothing (e.g. to check a
// run's settings against the ones it was saved with before loading it).
TrainingState read_training_state(const std::string& path);

// Only the model weights (e.g. for evaluation): accepts full checkpoints and plain state files,
// and copies them to wherever the model's parameters live.
void load_model_weights(const std::string& path, Module& model);

// The model weights of a checkpoint or plain state file, straight onto `device`, without a
// model: a DDP run's checkpoint (keys under "module." stripped) served on one GPU, say.
//   NamedTensors weights = nn::load_checkpoint("ckpt/last.safetensors", Device::cuda(0));
NamedTensors load_checkpoint(const std::string& path, Device device);

// The JSON a checkpoint keeps beside its tensors: the training position, `extra`, the kernel
// decisions in force, and the schedule, generator and scaler given (null: left out). Shared with
// the sharded checkpoints (parallel/sharded_checkpoint.h), which keep it in their index.
json::Value training_metadata(const TrainingState& state, const optim::LRScheduler* scheduler,
                              const Generator* generator, const amp::GradScaler* scaler);
// Checks that `meta` holds each part asked for, changing nothing, and returns its state;
// `source` names the checkpoint in errors.
TrainingState check_training_metadata(const json::Value& meta, const std::string& source, bool scheduler,
                                      bool generator, bool scaler);
// Restores the parts given (checked first by check_training_metadata) and adopts the decisions.
void restore_training_metadata(const json::Value& meta, const TrainingState& state, optim::LRScheduler* scheduler,
                               Generator* generator, amp::GradScaler* scaler);

}  // namespace ember::nn
