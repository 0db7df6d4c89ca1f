// Batch norm modules: buffers, PyTorch's initialisation, and the train/eval forward.
#include "nn/modules/batchnorm.h"

#include <sstream>

#include "autograd/functional.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "nn/init.h"

namespace ember::nn {

namespace {
struct RunningStatsRoute {
  bool active = false;  // a scope is open on this thread
  RunningStatsSink* sink = nullptr;
};
thread_local RunningStatsRoute running_stats_route;
}  // namespace

RunningStatsScope::RunningStatsScope(RunningStatsSink* sink)
    : previous_active_(running_stats_route.active), previous_sink_(running_stats_route.sink) {
  running_stats_route = {true, sink};
}

RunningStatsScope::~RunningStatsScope() { running_stats_route = {previous_active_, previous_sink_}; }

template <typename Derived>
BatchNormImplBase<Derived>::BatchNormImplBase(const BatchNormOptions& options_in, std::string type_name,
                                              int64_t min_dim, int64_t max_dim)
    : Cloneable<Derived>(std::move(type_name)), options(options_in), min_dim_(min_dim), max_dim_(max_dim) {
  EMBER_CHECK(options.num_features() > 0, this->type_name(), ": num_features must be positive, got ",
              options.num_features());
  reset();
}

template <typename Derived>
void BatchNormImplBase<Derived>::reset() {
  const int64_t c = options.num_features();
  if (options.affine()) {
    weight = this->register_parameter("weight", empty({c}));
    bias = this->register_parameter("bias", empty({c}));
  }
  if (options.track_running_stats()) {
    running_mean = this->register_buffer("running_mean", zeros({c}));
    running_var = this->register_buffer("running_var", ones({c}));
    num_batches_tracked = this->register_buffer("num_batches_tracked", zeros({}, TensorOptions(kInt64)));
  }
  reset_parameters();
}

template <typename Derived>
void BatchNormImplBase<Derived>::reset_running_stats() {
  if (!options.track_running_stats()) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  NoGradGuard no_grad;
  num_batches_tracked.zero_();
}

template <typename Derived>
void BatchNormImplBase<Derived>::reset_parameters() {
  reset_running_stats();
  if (options.affine()) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

template <typename Derived>
double BatchNormImplBase<Derived>::step_momentum() {
  NoGradGuard no_grad;
  num_batches_tracked.add_(1);
  if (options.momentum()) return *options.momentum();
  return 1.0 / static_cast<double>(num_batches_tracked.template item<int64_t>());
}

template <typename Derived>
Tensor BatchNormImplBase<Derived>::forward(const Tensor& input) {
  return run(input, false);
}

template <typename Derived>
Tensor BatchNormImplBase<Derived>::forward_relu(const Tensor& input) {
  return run(input, true);
}

template <typename Derived>
Tensor BatchNormImplBase<Derived>::run(const Tensor& input, bool relu) {
  EMBER_CHECK(input.dim() >= min_dim_ && input.dim() <= max_dim_, this->type_name(), ": expected ",
              min_dim_ == max_dim_ ? std::to_string(min_dim_) + "-D"
                                   : std::to_string(min_dim_) + "-D or " + std::to_string(max_dim_) + "-D",
              " input, got ", shape_str(input.sizes()));
  EMBER_CHECK(input.size(1) == options.num_features(), this->type_name(), ": expected ", options.num_features(),
              " channels in dim 1, got input ", shape_str(input.sizes()));
  // Before the batch is counted: batch_norm's kernels would read the other device's memory, and
  // its running-statistics update would fail half done.
  check_input_device(this->type_name(), input, weight.defined() ? weight : running_mean);
  // Batch statistics in training, or whenever no running statistics are tracked.
  bool use_batch_stats = this->is_training() || !options.track_running_stats();
  auto normalize = relu ? batch_norm_relu : batch_norm;
  const bool updates = this->is_training() && options.track_running_stats();
  if (updates && running_stats_route.active) {
    if (running_stats_route.sink != nullptr) {
      running_stats_route.sink->record(this, input, [this](const Tensor& mean, const Tensor& var, int64_t count) {
        apply_running_stats(mean, var, count);
      });
    }
    return normalize(input, Tensor(), Tensor(), weight, bias, true, 0.0, options.eps(), reducer);
  }
  double momentum = 0.0;
  if (updates) momentum = step_momentum();
  return normalize(input, running_mean, running_var, weight, bias, use_batch_stats, momentum, options.eps(),
                   use_batch_stats ? reducer : nullptr);
}

template <typename Derived>
void BatchNormImplBase<Derived>::apply_running_stats(const Tensor& mean, const Tensor& biased_var, int64_t count) {
  EMBER_CHECK(count > 1, this->type_name(), ": running statistics need more than 1 value per channel, got ", count);
  const double momentum = step_momentum();
  NoGradGuard no_grad;
  const Tensor unbiased = biased_var * (static_cast<double>(count) / static_cast<double>(count - 1));
  running_mean.mul_(1.0 - momentum).add_(mean.to(running_mean.device()).to(running_mean.dtype()) * momentum);
  running_var.mul_(1.0 - momentum).add_(unbiased.to(running_var.device()).to(running_var.dtype()) * momentum);
}

template <typename Derived>
std::string BatchNormImplBase<Derived>::extra_repr() const {
  std::ostringstream s;
  s << options.num_features() << ", eps=" << options.eps() << ", momentum=";
  if (options.momentum())
    s << *options.momentum();
  else
    s << "None";
  s << ", affine=" << (options.affine() ? "True" : "False")
    << ", track_running_stats=" << (options.track_running_stats() ? "True" : "False");
  return s.str();
}

template class BatchNormImplBase<BatchNorm1dImpl>;
template class BatchNormImplBase<BatchNorm2dImpl>;

}  // namespace ember::nn
