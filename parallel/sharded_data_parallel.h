// ShardedDataParallel: data parallelism that shards what DDP replicates (ZeRO, as PyTorch's
// fully_shard and DeepSpeed do). Every parameter is split along dim 0 over the group (padded
// where its rows do not divide; any shape works), and this rank's rows are what the optimizer
// sees: named_parameters() returns them, under the wrapped module's names.
//
//   auto world = ember::comm::init();
//   auto sharded = std::make_shared<ember::parallel::ShardedDataParallel>(
//       model, world, ember::parallel::ShardingOptions().stage(2));
//   ember::optim::AdamW optimizer(sharded->parameters(), ...);  // this rank's shards
//   Tensor loss = cross_entropy(sharded->forward(x), y);
//   loss.backward();     // gradients reduce-scattered into the shards' .grad while backward runs
//   sharded->clip_grad_norm_(1.0);                     // the global norm, across shards
//   optimizer.step();    // each rank steps its rows; the next forward all-gathers them
//
// - stage 1: the optimizer state is sharded (it only ever sees shards). The full-size gradient
//   buckets stay allocated between steps, as ZeRO-1 keeps full gradients.
// - stage 2: gradients too: a bucket's buffer lives only from its first gradient until its
//   reduce-scatter is done, and each rank keeps its shard's gradient only.
// - stage 3 (fully sharded): parameters too. Each unit (ShardingOptions: by module type, by a
//   parameter count, or each child) all-gathers its parameters just before its forward, frees
//   them after it (reshard_after_forward), gathers them again when backward reaches it, and
//   reduce-scatters its gradients as soon as they are all there. Between uses the module's
//   parameters keep their shapes but hold no bytes.
// In stages 1 and 2 the module's own parameters hold the full values for forward and backward.
// After a synchronised backward they are stale until the next forward (or gather_parameters(),
// or state_dict()) all-gathers the shards, so every rank must take part in those calls.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "nn/module.h"
#include "nn/options.h"
#include "parallel/shard_layout.h"

namespace ember::parallel {

struct ShardingOptions {
  EMBER_ARG(int, stage) = 2;
  // Parameters are reduced and gathered in buckets of about this size (reverse registration
  // order, so the last layers' gradients go first).
  EMBER_ARG(double, bucket_cap_mb) = 25.0;
  EMBER_ARG(bool, broadcast_buffers) = true;  // rank 0's buffers before each training forward
  EMBER_ARG(bool, find_unused_parameters) = false;
  // Gradients travel in this dtype (divided by the group size first, so a 16-bit sum keeps its
  // range) and land in the shards' dtype; unset: the parameters' own.
  EMBER_ARG(std::optional<DType>, reduce_dtype) = std::nullopt;
  // The module's gathered parameters (so its forward and backward) in this dtype, e.g. bf16;
  // the shards, the optimizer and state dicts keep the parameters' own dtype. Gradients then
  // travel in this dtype unless reduce_dtype says otherwise.
  EMBER_ARG(std::optional<DType>, param_dtype) = std::nullopt;
  // Stage 3's units: the modules whose type_name() is listed here; else, with wrap_min_params > 0,
  // each module whose parameters not yet in a unit number at least that many (its children
  // decided first); else each child of the wrapped module. The wrapped module's other parameters
  // form the root unit. A unit is called through its holder or a container (its forward hooks
  // gather it).
  EMBER_ARG(std::vector<std::string>, wrap_module_types) = {};
  EMBER_ARG(int64_t, wrap_min_params) = 0;
  // Stage 3: free a unit's gathered parameters after its forward (gathered again for backward).
  EMBER_ARG(bool, reshard_after_forward) = true;
  // Stage 3: start the all-gather of the unit expected next before the current one computes (in
  // forward the next unit in the order the first training forward called them, in backward the
  // one before), with at most limit_all_gathers gathers started and not yet unpacked.
  EMBER_ARG(bool, prefetch) = true;
  EMBER_ARG(int, limit_all_gathers) = 2;
};

// Counts since construction (stage 3).
struct ShardedStats {
  int64_t unit_gathers = 0;  // all-gathers of a unit's parameters
  int64_t prefetched = 0;    // of them, started ahead of the unit's use
};

// This rank's piece of one parameter: rows [row_begin, row_begin + local.size(0)) of the full
// tensor (a 0-dim parameter counts as one row: its local piece is [1] or [0]). `local` is the
// shard itself, the tensor the optimizer steps and keys its state by.
struct LocalShard {
  std::string name;
  Shape global_shape;
  int64_t row_begin = 0;
  Tensor local;
};

// Bytes this rank holds for the sharded state, counted from the tensors themselves.
struct ShardedMemory {
  int64_t full_parameters = 0;    // the module's full parameters
  int64_t shards = 0;             // this rank's parameter shards
  int64_t shard_grads = 0;        // their .grad
  int64_t gradient_buckets = 0;   // full-size reduce-scatter inputs alive now
  int64_t gathers_in_flight = 0;  // stage 3: buffers of all-gathers started and not yet unpacked
};

class ShardedDataParallel : public nn::Module {
 public:
  ShardedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<comm::ProcessGroup> group,
                      ShardingOptions options = {});
  ~ShardedDataParallel() override;

  Tensor forward(const Tensor& input) override;
  // For modules with other forward signatures: run the forward yourself between these two.
  void pre_forward();
  void post_forward(const std::vector<Tensor>& outputs);

  // All-gathers the shards into the module's full parameters when a synchronised backward has
  // run since the last gather (an optimizer may have stepped them). Collective.
  void gather_parameters();
  // Broadcasts rank 0's buffers (nothing with broadcast_buffers=false). Collective.
  void sync_buffers();
  // clip_grad_norm_ over every rank's shard gradients seen as one vector: the norm of the full,
  // averaged gradient, as DDP with optim::clip_grad_norm_ would compute it. Collective.
  double clip_grad_norm_(double max_norm, double norm_type = 2.0, bool error_if_nonfinite = false);

  // This rank's shards (leaf tensors, what the optimizer steps), under the module's names.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const override;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const override;
  // Full tensors under the wrapped module's keys (a bare model loads them), the parameters
  // gathered from the shards in the shards' dtype: every rank must call it.
  NamedTensors state_dict() const override;
  // Full tensors: this rank's rows into the shards, buffers into the module (names and shapes
  // checked as a bare model's load checks them).
  nn::LoadResult load_state_dict(const NamedTensors& state, bool strict = true) override;
  void train(bool on = true) override;
  std::string extra_repr() const override;

  const std::shared_ptr<nn::Module>& module() const { return module_; }
  const std::shared_ptr<comm::ProcessGroup>& process_group() const { return group_; }
  Device device() const { return device_; }
  int stage() const { return options_.stage(); }
  const ShardingOptions& options() const { return options_; }
  ShardedMemory memory() const;
  const ShardedStats& stats() const { return stats_; }
  size_t bucket_count() const { return buckets_.size(); }
  // How parameter `name` is split (its rows per rank).
  const DimZeroShard& shard_of(const std::string& name) const;
  // Every trainable parameter's piece on this rank, in named_parameters() order.
  std::vector<LocalShard> local_shards() const;
  // After writing into the shards other than by an optimizer step (a sharded checkpoint loaded
  // into them): the module's full parameters are stale, and the next forward gathers them.
  void shards_changed();
  // Stage 3: the units, as module paths ("" for the root unit), in forward order.
  std::vector<std::string> unit_names() const;

  // Gradient accumulation: backward passes inside the scope only accumulate into the module's
  // full .grad, locally; the next synchronised backward reduces the sum.
  class NoSync {
   public:
    explicit NoSync(ShardedDataParallel& owner) : owner_(owner), previous_(owner.sync_) { owner_.sync_ = false; }
    ~NoSync() { owner_.sync_ = previous_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    ShardedDataParallel& owner_;
    bool previous_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // The full parameters gathered once and kept while the scope lives (stage 3 frees them when it
  // ends; stages 1 and 2 keep them anyway), so forwards inside run no collective and ranks may
  // evaluate different numbers of batches. Entering is collective. As FSDP's summon_full_params.
  class FullParameters {
   public:
    explicit FullParameters(ShardedDataParallel& owner);
    ~FullParameters();
    FullParameters(const FullParameters&) = delete;
    FullParameters& operator=(const FullParameters&) = delete;

   private:
    ShardedDataParallel& owner_;
    bool previous_;
  };
  FullParameters full_parameters() { return FullParameters(*this); }

 private:
  struct Param {
    std::string name;
    Tensor full;   // the module's parameter
    Tensor shard;  // this rank's rows: a leaf the optimizer steps
    size_t bucket = 0;
    size_t slot = 0;
    size_t hook = 0;
    size_t unit = 0;  // stage 3
  };
  // Stage 3: parameters gathered and freed together, around one module's forward and backward.
  struct Unit {
    std::string name;              // the module's path; "" for the root unit
    nn::Module* module = nullptr;  // null for the root unit
    std::vector<size_t> params;
    size_t bucket = 0;
    size_t pre_hook = 0, post_hook = 0;
  };
  struct Bucket {
    std::vector<size_t> params;
    ShardedLayout layout;
    DType wire;          // what the gradients travel in
    Tensor grad_input;   // ranks sections of full gradients (stage 1 keeps it; stage 2 drops it)
    Tensor grad_output;  // this rank's section, reduced
    size_t pending = 0;
    bool ready = false;
    comm::WorkPtr work;
  };

  void build_buckets();
  void mark_grad_ready(size_t index);
  void launch_ready_buckets();
  // Bucket `index`'s reduce-scatter waited for and its rows added into the shards' .grad.
  void harvest(size_t index);
  void finalize();
  void reset_iteration();
  void gather(bool force) const;
  void shards_from_full();
  // Stage 3 (shard_units.cc).
  void build_units();
  std::vector<std::vector<size_t>> unit_buckets() const;
  struct PendingGather {
    comm::WorkPtr work;
    Tensor section, flat;
  };
  // Bucket b's shards packed into this rank's section in `dtype` and an all-gather of every
  // rank's section started (inside the caller's OverlapScope, if any).
  PendingGather start_bucket_gather(const Bucket& b, DType dtype) const;
  bool unit_materialized(size_t u) const;
  void start_gather(size_t u, bool prefetch) const;
  void gather_unit(size_t u) const;
  void prefetch_after(size_t u, int direction) const;
  void drain_gathers() const;
  void before_unit_forward(size_t u);
  void free_unit(size_t u) const;
  void gather_all_units() const;
  void free_all_units() const;
  void after_unit_forward(size_t u, const std::vector<Tensor>& outputs);

  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<comm::ProcessGroup> group_;
  ShardingOptions options_;
  Device device_;
  std::vector<Param> params_;
  std::vector<Bucket> buckets_;
  std::vector<Unit> units_;
  mutable std::vector<PendingGather> pending_;  // per unit
  std::vector<size_t> forward_order_;           // units, as the first training forward called them
  bool order_known_ = false;
  bool hold_full_ = false;  // inside a FullParameters scope
  mutable ShardedStats stats_;
  std::vector<bool> ready_;
  std::vector<bool> unused_;
  size_t next_bucket_ = 0;
  size_t next_harvest_ = 0;
  bool sync_ = true;
  bool in_backward_ = false;
  mutable bool stale_ = false;  // shards changed since the full parameters were gathered
};

}  // namespace ember::parallel
