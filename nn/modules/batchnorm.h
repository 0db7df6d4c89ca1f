// BatchNorm1d ([N, C] or [N, C, L]) and BatchNorm2d ([N, C, H, W]): affine weight/bias and the
// running_mean / running_var / num_batches_tracked buffers PyTorch's state_dict carries.
#pragma once

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
  explicit BatchNorm1dImpl(const BatchNormOptions& options)
      : BatchNormImplBase(options, "BatchNorm1d", 2, 3) {}
};
EMBER_MODULE(BatchNorm1d);

class BatchNorm2dImpl : public BatchNormImplBase<BatchNorm2dImpl> {
 public:
  explicit BatchNorm2dImpl(const BatchNormOptions& options)
      : BatchNormImplBase(options, "BatchNorm2d", 4, 4) {}
};
EMBER_MODULE(BatchNorm2d);

}  // namespace ember::nn
