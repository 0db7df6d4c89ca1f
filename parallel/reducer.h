// The DDP reducer: parameters' gradients grouped into flat buckets (reverse registration order,
// first bucket 1 MB, then 25 MB by default). Each parameter's post-accumulate-grad hook marks it
// ready; a bucket whose last gradient arrived starts its all-reduce at once, while backward is
// still running, and buckets start in index order on every rank. A callback at the end of the
// backward pass waits for all of them and writes the averaged gradients back. After the first
// iteration the buckets are rebuilt once, in the order gradients actually arrived (rank 0's).
// On a GPU the buckets live on the parameters' device: gradients are copied in on the current
// stream, a device group's all-reduce queues behind them, and the end-of-backward wait makes the
// current stream (not the host) wait for it before the averages are written back.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "parallel/bucket_autotune.h"
#include "parallel/comm_hooks.h"

namespace ember::parallel {

struct ReducerOptions {
  double first_bucket_mb = 1.0;
  // kAuto (bucket_autotune.h): buckets of 25 MB (after a first of first_bucket_mb) for two
  // synchronised iterations, then trial layouts, then the one measured fastest, for good.
  double bucket_cap_mb = 25.0;
  // kAuto: timed iterations of each trial layout (its median counts), after one untimed.
  int autotune_trial_steps = 3;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool rebuild_buckets = true;
};

// What the last synchronised backward did (for tests and benchmarks).
struct ReducerStats {
  size_t buckets = 0;
  size_t launched_during_backward = 0;                          // bucket all-reduces started from gradient hooks
  std::chrono::nanoseconds first_launch_to_end_of_backward{0};  // > 0: communication overlapped compute
  // Buckets whose communication had already completed (Work::is_completed(), set on the
  // communication thread) when backward's last node finished: work fully hidden behind compute.
  // Host time: on a GPU the host queues backward ahead of the device, so this says little there
  // unless the host waited for the device before backward's end.
  size_t completed_before_end_of_backward = 0;
  // Host time spent waiting for all-reduces after backward's last node (near zero for a device
  // group, whose wait only queues a stream wait), and from the first launch until those waits
  // returned.
  std::chrono::nanoseconds wait_time{0};
  std::chrono::nanoseconds comm_time{0};
};

class Reducer {
 public:
  Reducer(std::vector<std::pair<std::string, Tensor>> parameters, std::shared_ptr<comm::ProcessGroup> group,
          ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Called after forward, before backward: with find_unused_parameters, the parameters the
  // outputs do not depend on are found here and count as ready at once.
  void prepare_for_backward(const std::vector<Tensor>& outputs);
  void set_sync(bool sync) { sync_ = sync; }
  bool sync() const { return sync_; }
  void register_comm_hook(CommHook hook) { hook_ = std::move(hook); }
  const ReducerStats& stats() const { return stats_; }
  size_t bucket_count() const { return buckets_.size(); }
  std::vector<std::vector<std::string>> bucket_parameter_names() const;
  // Bucket b's flat buffer (its parameters' gradients in bucket_parameter_names() order).
  const Tensor& bucket_buffer(size_t b) const { return buckets_.at(b).buffer; }
  bool rebuild_pending() const { return options_.rebuild_buckets && !rebuilt_ && iterations_ > 0; }
  // With bucket_cap_mb = kAuto: the choice and its measurements, once made (after the trials);
  // null before, and without kAuto.
  const BucketChoice* bucket_choice() const { return choice_ ? &*choice_ : nullptr; }
  // Whether bucket b's collective, in the synchronised backward now running, has been launched and
  // has completed (Work::is_completed()); false outside one. From a gradient hook: evidence that
  // communication progresses while backward still runs.
  bool bucket_reduced(size_t b) const;

  // Join support: the collectives one backward of an active rank issues, performed with zero
  // gradients by a rank that has run out of data.
  void shadow_backward();

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;  // element offset of each parameter in the buffer
    Tensor buffer;
    size_t pending = 0;
    bool ready = false;
    comm::WorkPtr work;
  };

  void build_buckets(const std::vector<size_t>& order);
  void mark_grad_ready(size_t index);
  void mark_bucket_ready(size_t bucket);
  void launch_ready_buckets(bool from_hook);
  void finalize();
  void reset_iteration();
  void rebuild_from_first_iteration();
  void point_grads_at_buckets();
  bool autotuning() const { return options_.bucket_cap_mb == kAuto; }
  // kAuto's steps, after each synchronised iteration (bucket_autotune.h): after the second, the
  // group's all-reduce timed at a few sizes and the simulation's pick agreed; then each trial
  // layout for autotune_trial_steps iterations; then the fastest (the slowest rank's median).
  void autotune_after_iteration(double window_s);
  void start_trials();
  void finish_trials();
  AllReduceCost measure_all_reduce();

  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::shared_ptr<comm::ProcessGroup> group_;
  ReducerOptions options_;
  Device device_;  // the parameters' (one device: DistributedDataParallel checks)
  CommHook hook_;
  std::vector<size_t> hook_handles_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter -> bucket
  std::vector<size_t> slot_of_;    // parameter -> position inside its bucket
  std::vector<bool> ready_;
  std::vector<bool> unused_;
  std::vector<size_t> arrival_order_;
  std::vector<size_t> order_;                      // the buckets' parameter order (rank 0's arrival order once rebuilt)
  std::vector<int64_t> bytes_;                     // per parameter
  std::vector<int> kind_;                          // per parameter: its (dtype, device), which a bucket holds one of
  double first_mb_ = 1, cap_mb_ = 25;              // the layout in force
  GradientTimeline timeline_;                      // the measured iteration's (kAuto)
  double window_start_ = 0;                        // this iteration's first gradient (seconds)
  std::vector<std::pair<double, double>> trials_;  // (first, cap) MB
  std::vector<std::vector<double>> trial_seconds_;
  size_t trial_ = 0;
  bool trial_warmed_ = false;            // the trial layout's untimed first iteration has run
  std::optional<BucketChoice> pending_;  // the simulation's, until the trials end
  std::optional<BucketChoice> choice_;
  size_t next_bucket_ = 0;
  bool sync_ = true;
  bool in_backward_ = false;
  bool rebuilt_ = false;
  int64_t iterations_ = 0;
  ReducerStats stats_;
  std::chrono::steady_clock::time_point first_launch_;
};

}  // namespace ember::parallel
