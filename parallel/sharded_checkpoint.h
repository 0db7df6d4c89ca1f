// Sharded checkpoints (as PyTorch's distributed checkpoint) for ShardedDataParallel: a directory
// in which every rank writes its own safetensors file (its rows of each parameter and their
// optimizer state) and rank 0 then writes index.json: the files, every parameter's global shape,
// the rows each file holds, the optimizer's groups, and the training state, schedule and scaler.
//
//   parallel::save_sharded_checkpoint("ckpt/epoch-3", *sharded, &optimizer, &schedule, state);
//   // later, at any world size (each rank reads the rows it now owns from the files holding them):
//   nn::TrainingState s = parallel::load_sharded_checkpoint("ckpt/epoch-3", *sharded, &optimizer, &schedule);
//   // or in one process, into a bare model and an optimizer over its parameters (a bare
//   // model's own state_dict keys, no prefix):
//   nn::TrainingState s = parallel::load_sharded_checkpoint("ckpt/epoch-3", *model, &optimizer, &schedule);
//
// Crash safety: each save writes its files under a new serial number, and the index, written
// atomically after every rank has written its file, is what names them; the previous serial's
// files are removed only after that. A save that dies part way leaves the previous checkpoint in
// the directory whole. A rank that fails to write makes the save raise on every rank, naming it.
//
// Random generators: each rank's is saved in its own file. At the saved world size every rank
// gets its own back; at another, rank r takes file r mod N's.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "nn/checkpoint.h"
#include "parallel/sharded_data_parallel.h"

namespace ember::parallel {

// Collective: every rank of the model's group calls it. `optimizer`, `scheduler`, `generator`
// and `scaler` may be null (not saved); the optimizer must be over the model's shards.
void save_sharded_checkpoint(const std::string& dir, const ShardedDataParallel& model,
                             const optim::Optimizer* optimizer, const optim::LRScheduler* scheduler,
                             const nn::TrainingState& state, const Generator* generator = &default_generator(),
                             const amp::GradScaler* scaler = nullptr);

// Collective. Restores every part given at this group's size, whatever the size that saved it;
// everything is read and checked before anything changes. The next forward gathers the loaded
// shards.
nn::TrainingState load_sharded_checkpoint(const std::string& dir, ShardedDataParallel& model,
                                          optim::Optimizer* optimizer, optim::LRScheduler* scheduler,
                                          Generator* generator = &default_generator(),
                                          amp::GradScaler* scaler = nullptr);
// One process, a bare model (strict: every key of its state_dict must be there and no other).
nn::TrainingState load_sharded_checkpoint(const std::string& dir, nn::Module& model, optim::Optimizer* optimizer,
                                          optim::LRScheduler* scheduler, Generator* generator = &default_generator(),
                                          amp::GradScaler* scaler = nullptr);

// A directory holding an index.json of this format.
bool is_sharded_checkpoint(const std::string& dir);
// The training state (epoch, step, loader position, extra) of a sharded checkpoint, restoring nothing.
nn::TrainingState read_sharded_training_state(const std::string& dir);

// Saves that stall training only for a copy to host memory: save() copies this rank's shards,
// their optimizer state and (rank 0) the buffers, hands them to a background thread that writes
// the file, and returns. The checkpoint is complete once wait() has returned on every rank, which
// the next save() does first; wait() is collective (every rank learns whether every file was
// written, then rank 0 writes the index). Dropping the object waits for the writer but writes no
// index, so a save never waited for is not a checkpoint and the previous one stays the loadable one.
class AsyncShardedCheckpoint {
 public:
  explicit AsyncShardedCheckpoint(const ShardedDataParallel& model);
  ~AsyncShardedCheckpoint();
  AsyncShardedCheckpoint(const AsyncShardedCheckpoint&) = delete;
  AsyncShardedCheckpoint& operator=(const AsyncShardedCheckpoint&) = delete;

  void save(const std::string& dir, const optim::Optimizer* optimizer, const optim::LRScheduler* scheduler,
            const nn::TrainingState& state, const Generator* generator = &default_generator(),
            const amp::GradScaler* scaler = nullptr);
  void wait();
  bool pending() const { return pending_ != nullptr; }

  struct Pending;  // a snapshot being written (sharded_checkpoint.cc)

 private:
  const ShardedDataParallel& model_;
  std::unique_ptr<Pending> pending_;
  std::thread writer_;
};

}  // namespace ember::parallel
