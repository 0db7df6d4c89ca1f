// BatchNorm1d ([N, C] or [N, C, L]) and BatchNorm2d ([N, C, H, W]): affine weight/bias and the
// running_mean / running_var / num_batches_tracked buffers PyTorch's state_dict carries.
#pragma once

#include <functional>
#include <optional>

#include "autograd/functional.h"
#include "nn/module.h"
#include "nn/options.h"

namespace ember::nn {

struct BatchNormOptions {
  BatchNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT
  EMBER_ARG(int64_t, num_features);
  EMBER_ARG(double, eps) = 1e-5;
  // nullopt: a cumulative moving average (1 / num_batches_tracked), as PyTorch's momentum=None.
  EMBER_ARG(std::optional<double>, momentum) = 0.1;
  EMBER_ARG(bool, affine) = true;
  EMBER_ARG(bool, track_running_stats) = true;
};

// Applies a batch's per-channel mean and biased variance over `count` values per channel to a
// BatchNorm's running statistics (counting one batch).
using RunningStatsUpdate = std::function<void(const Tensor& mean, const Tensor& biased_var, int64_t count)>;

// Takes a training BatchNorm's running-statistics update instead of the layer applying it at once:
// a pipeline applies one update per mini-batch from all its micro-batches (deferred batch norm).
class RunningStatsSink {
 public:
  virtual ~RunningStatsSink() = default;
  // `layer` normalised `input` with its batch statistics; `update` applies statistics to it.
  virtual void record(const Module* layer, const Tensor& input, RunningStatsUpdate update) = 0;
};

// For the scope, training BatchNorm layers on this thread hand their running-statistics update to
// `sink`, or, with a null sink, skip it (a pipeline recomputing a forward in the backward must not
// count the batch twice).
class RunningStatsScope {
 public:
  explicit RunningStatsScope(RunningStatsSink* sink);
  ~RunningStatsScope();
  RunningStatsScope(const RunningStatsScope&) = delete;
  RunningStatsScope& operator=(const RunningStatsScope&) = delete;

 private:
  bool previous_active_;
  RunningStatsSink* previous_sink_;
};

// Shared by the 1-D and 2-D forms, which differ only in the input ranks they accept.
template <typename Derived>
class BatchNormImplBase : public Cloneable<Derived> {
 public:
  BatchNormImplBase(const BatchNormOptions& options, std::string type_name, int64_t min_dim, int64_t max_dim);
  void reset() override;
  void reset_running_stats();
  void reset_parameters();
  Tensor forward(const Tensor& input) override;
  // relu(forward(input)) in one fused pass (a network's BN -> ReLU); the same results.
  Tensor forward_relu(const Tensor& input);
  std::string extra_repr() const override;
  // The momentum this step uses (resolving the cumulative-average mode), after counting the batch.
  double step_momentum();
  // Counts a batch and moves the running statistics towards its per-channel mean and biased
  // variance over `count` values (the variance made unbiased), as a training forward does.
  void apply_running_stats(const Tensor& mean, const Tensor& biased_var, int64_t count);

  BatchNormOptions options;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  // Set by parallel::convert_sync_batchnorm: training statistics then span all processes (or all
  // of DataParallel's replicas). Clones share it.
  std::shared_ptr<BatchNormStatsReducer> reducer;
  void copy_settings_into(Module& copy) const override { static_cast<Derived&>(copy).reducer = reducer; }

 private:
  Tensor run(const Tensor& input, bool relu);

  int64_t min_dim_, max_dim_;
};

class BatchNorm1dImpl : public BatchNormImplBase<BatchNorm1dImpl> {
 public:
  explicit BatchNorm1dImpl(const BatchNormOptions& options) : BatchNormImplBase(options, "BatchNorm1d", 2, 3) {}
};
EMBER_MODULE(BatchNorm1d);

class BatchNorm2dImpl : public BatchNormImplBase<BatchNorm2dImpl> {
 public:
  explicit BatchNorm2dImpl(const BatchNormOptions& options) : BatchNormImplBase(options, "BatchNorm2d", 4, 4) {}
};
EMBER_MODULE(BatchNorm2d);

}  // namespace ember::nn
