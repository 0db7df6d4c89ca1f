// DistributedDataParallel: one process per device, gradients averaged across the process group
// during backward. Wrap the model, then train as usual:
//
//   auto world = ember::comm::init();
//   auto ddp = std::make_shared<ember::parallel::DistributedDataParallel>(model, world);
//   Tensor loss = cross_entropy(ddp->forward(x), y);
//   loss.backward();          // buckets all-reduce while backward runs; returns when averaged
//   optimizer.step();
//
// Construction checks that every rank registered the same parameters (names, shapes, dtypes)
// and broadcasts parameters and buffers from rank 0. state_dict() has exactly the wrapped
// module's keys (no "module." prefix), so rank 0's checkpoint loads into a bare model.
//
// The module lives on one device per process (the CPU, or e.g. cuda:LOCAL_RANK over NCCL): the
// buckets and every collective DDP issues use tensors on that device, so a group for GPUs never
// needs host tensors, and nothing here reads a collective's result without a tensor op that
// orders on the current stream (a device Work's wait() does not block the host).
#pragma once

#include <memory>

#include "comm/process_group.h"
#include "nn/module.h"
#include "parallel/reducer.h"

namespace ember::parallel {

struct DDPOptions {
  double first_bucket_mb = 1.0;
  // kAuto: chosen by measurement in the first iterations (parallel/bucket_autotune.h), the same
  // on every rank; reducer().bucket_choice() holds the measurements.
  double bucket_cap_mb = 25.0;
  int autotune_trial_steps = 3;   // kAuto: iterations per trial layout
  bool broadcast_buffers = true;  // rank 0's buffers (BN running stats) before each forward
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool rebuild_buckets = true;
};

class DistributedDataParallel : public nn::Module {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<comm::ProcessGroup> group,
                          DDPOptions options = {});
  ~DistributedDataParallel() override;

  Tensor forward(const Tensor& input) override;
  // For modules with other forward signatures: run the forward yourself between these two.
  void pre_forward();
  void post_forward(const std::vector<Tensor>& outputs);
  // Broadcasts rank 0's buffers, as every training forward does first (nothing with
  // broadcast_buffers=false). After the last training step the other ranks' batch-norm statistics
  // follow their own last batch; call this on every rank before evaluating on every rank, so that
  // all evaluate rank 0's (the checkpointed) model.
  void sync_buffers();

  const std::shared_ptr<nn::Module>& module() const { return module_; }
  const std::shared_ptr<comm::ProcessGroup>& process_group() const { return group_; }
  // Where the module's parameters and buffers live, and DDP's collectives run.
  Device device() const { return device_; }
  Reducer& reducer() { return *reducer_; }
  void register_comm_hook(CommHook hook) { reducer_->register_comm_hook(std::move(hook)); }

  // The wrapped module's view of parameters, buffers and state (no prefix).
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const override;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const override;
  NamedTensors state_dict() const override;
  nn::LoadResult load_state_dict(const NamedTensors& state, bool strict = true) override;
  void train(bool on = true) override;
  std::string extra_repr() const override;

  // Gradient accumulation: backward passes inside the scope only accumulate locally.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), previous_(ddp.reducer_->sync()) {
      ddp_.reducer_->set_sync(false);
    }
    ~NoSync() { ddp_.reducer_->set_sync(previous_); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(*this); }

 private:
  friend class Join;
  void broadcast_state_from(int root);  // parameters and buffers
  // Join: the per-forward count of ranks still training (0 once all have joined).
  int64_t count_active(bool active);
  // An int64 scalar all-reduced over the group on device_, read back on the host.
  int64_t all_reduce_scalar(int64_t value, comm::ReduceOp op);

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<comm::ProcessGroup> group_;
  DDPOptions options_;
  Device device_;
  std::unique_ptr<Reducer> reducer_;
  bool join_enabled_ = false;
};

}  // namespace ember::parallel
