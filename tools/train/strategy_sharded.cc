// ShardedDataParallel (--shard-stage 1|2|3): DDP's launch and data, with the optimizer state, the
// gradients too, or the parameters too sharded over the ranks. The optimizer steps this rank's
// shards, and checkpoints are directories in which every rank writes its shard, loadable at any
// process count (parallel/sharded_checkpoint.h).
#include "comm/init.h"
#include "parallel/grad_scaler_sync.h"
#include "parallel/sharded_checkpoint.h"
#include "parallel/sharded_data_parallel.h"
#include "tools/train/strategy.h"

namespace ember::train {

namespace {

class ShardedStrategy : public TrainStrategy {
 public:
  explicit ShardedStrategy(const TrainConfig& config) : TrainStrategy(config), world_(comm::init()) {}

  std::shared_ptr<comm::ProcessGroup> world() const override { return world_; }

  void wrap(const std::shared_ptr<nn::Module>& model) override {
    model->to(device_);
    model_ = model;
    sharded_ = std::make_shared<parallel::ShardedDataParallel>(
        model, world_, parallel::ShardingOptions().stage(static_cast<int>(config_.shard_stage)));
    trained_ = sharded_;
  }

  nn::Module& optimized() const override { return *sharded_; }

  void use_scaler(amp::GradScaler* scaler) override {
    TrainStrategy::use_scaler(scaler);
    if (scaler) parallel::sync_grad_scaler(*scaler, *sharded_);
  }

  // Rank 0's batch-norm statistics (the checkpoint's), and the full parameters gathered once for
  // the whole evaluation: ranks evaluate different numbers of batches, so no forward may be a
  // collective.
  EvalTarget evaluation_target() override {
    sharded_->sync_buffers();
    return {sharded_.get(), device_, device_,
            std::make_shared<parallel::ShardedDataParallel::FullParameters>(*sharded_)};
  }
  EvalTarget eval_only_target() override { return evaluation_target(); }

  void save_checkpoint(const std::string& path, const optim::Optimizer& optimizer, const optim::LRScheduler& schedule,
                       const nn::TrainingState& state) override {
    parallel::save_sharded_checkpoint(path, *sharded_, &optimizer, &schedule, state, &default_generator(), scaler_);
  }

  nn::TrainingState load_checkpoint(const std::string& path, optim::Optimizer& optimizer,
                                    optim::LRScheduler& schedule) override {
    EMBER_CHECK(parallel::is_sharded_checkpoint(path), "train --shard-stage ", config_.shard_stage, " (rank ",
                world_->rank(), "): --resume ", path,
                " is a single-file checkpoint, whose optimizer state is whole; resume it without --shard-stage "
                "(sharded runs resume from their checkpoint directories)");
    return parallel::load_sharded_checkpoint(path, *sharded_, &optimizer, &schedule, &default_generator(), scaler_);
  }

  void load_weights(const std::string& path) override {
    if (parallel::is_sharded_checkpoint(path))
      parallel::load_sharded_checkpoint(path, *sharded_, nullptr, nullptr, nullptr, nullptr);
    else
      nn::load_model_weights(path, *sharded_);  // full tensors: each rank keeps its rows
  }

  std::string where() const override {
    return device_.str() + ", ShardedDataParallel stage " + std::to_string(config_.shard_stage);
  }
  std::string batch_note() const override {
    return std::string(", gradients reduce-scattered over ") + (device_.is_cuda() ? "NCCL" : "MPI");
  }

 private:
  std::shared_ptr<comm::ProcessGroup> world_;
  std::shared_ptr<parallel::ShardedDataParallel> sharded_;
};

}  // namespace

std::unique_ptr<TrainStrategy> make_sharded_strategy(const TrainConfig& config) {
  if (config.shard_stage == 0) return nullptr;  // flag parsing required a launcher
  return std::make_unique<ShardedStrategy>(config);
}

}  // namespace ember::train
