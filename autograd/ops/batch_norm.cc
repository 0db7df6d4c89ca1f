// batch_norm and batch_norm_relu: statistics, normalisation (with the ReLU fused in for the
// latter), running-stat update, and a backward built from the backend's two backward halves
// (per-channel reductions, then the input gradient), which apply ReLU's mask from the saved output.
#include "autograd/function.h"
#include "autograd/functional.h"
#include "core/autocast.h"
#include "autograd/saved.h"
#include "core/autograd_hooks.h"
#include "core/backend.h"
#include "core/device_check.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember {

namespace autograd {
namespace {

class BatchNormBackward final : public Node {
 public:
  // `relu_output`: the fused forward's output, whose zeros mask the gradient; undefined without ReLU.
  BatchNormBackward(const Tensor& input, const Tensor& mean, const Tensor& invstd, const Tensor& weight, bool training,
                    int64_t count, std::shared_ptr<BatchNormStatsReducer> reducer, const Tensor& relu_output)
      : input_(input),
        mean_(mean),
        invstd_(invstd),
        weight_(weight),
        relu_output_(relu_output),
        relu_(relu_output.defined()),
        training_(training),
        count_(count),
        weight_dtype_(weight.defined() ? weight.dtype() : input.dtype()),
        reducer_(std::move(reducer)) {}
  std::string name() const override { return relu_ ? "BatchNormReluBackward0" : "NativeBatchNormBackward0"; }
  std::string forward_op() const override { return relu_ ? "batch_norm_relu" : "batch_norm"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const Tensor& x = input_.unpack(name());
    const Tensor& mean = mean_.unpack(name());
    const Tensor& invstd = invstd_.unpack(name());
    const Tensor& weight = weight_.unpack(name());
    const Tensor y = relu_ ? relu_output_.unpack(name()) : Tensor();
    const KernelTable& k = kernels_for(g.device(), "batch_norm backward");
    auto [sum_dy, sum_dy_xmu] = k.batch_norm_backward_reduce(g, x, mean, y);
    Tensor grad_input, grad_weight, grad_bias;
    // weight/bias gradients are this process's share (DDP averages them like any other).
    if (needs_input_grad(*this, 1)) grad_weight = (sum_dy_xmu * invstd).to(weight_dtype_);
    if (needs_input_grad(*this, 2)) grad_bias = sum_dy.to(weight_dtype_);
    // SyncBatchNorm: the input gradient needs the sums over the global batch.
    if (reducer_ && training_ && needs_input_grad(*this, 0)) reducer_->reduce_grad_sums(sum_dy, sum_dy_xmu);
    if (needs_input_grad(*this, 0)) {
      // In evaluation the statistics are constants: only the affine scale reaches the input.
      Tensor zero = zeros_like(sum_dy);
      grad_input = k.batch_norm_backward_input(g, x, mean, invstd, weight, training_ ? sum_dy : zero,
                                               training_ ? sum_dy_xmu : zero, count_, y);
    }
    return {grad_input, grad_weight, grad_bias};
  }

  void release_saved() override {
    input_.reset();
    mean_.reset();
    invstd_.reset();
    weight_.reset();
    relu_output_.reset();
  }

 private:
  SavedTensor input_, mean_, invstd_, weight_, relu_output_;
  bool relu_;
  bool training_;
  int64_t count_;
  DType weight_dtype_;
  std::shared_ptr<BatchNormStatsReducer> reducer_;
};

}  // namespace
}  // namespace autograd

namespace {

Tensor batch_norm_maybe_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                             const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps,
                             std::shared_ptr<BatchNormStatsReducer> reducer, bool relu) {
  const char* op = relu ? "batch_norm_relu" : "batch_norm";
  common_device(op, {{input, "input"},
                     {running_mean, "running_mean"},
                     {running_var, "running_var"},
                     {weight, "weight"},
                     {bias, "bias"}});
  EMBER_CHECK(input.dim() >= 2, op, ": expected input of at least 2 dims [N, C, ...], got ", shape_str(input.sizes()));
  EMBER_CHECK(is_floating(input.dtype()), op, ": expected a floating input, got ", dtype_name(input.dtype()));
  const int64_t channels = input.size(1);
  for (const Tensor* t : {&running_mean, &running_var, &weight, &bias}) {
    if (!t->defined()) continue;
    EMBER_CHECK(t->dim() == 1 && t->size(0) == channels, op, ": expected per-channel tensors of shape [", channels,
                "] for input ", shape_str(input.sizes()), ", got ", shape_str(t->sizes()));
    EMBER_CHECK(is_floating(t->dtype()), op, ": expected floating per-channel tensors, got ", dtype_name(t->dtype()));
  }
  EMBER_CHECK(running_mean.defined() == running_var.defined(), op,
              ": expected running_mean and running_var both given or both absent");
  EMBER_CHECK(training || running_mean.defined(), op,
              ": running_mean and running_var must be defined in evaluation mode");
  int64_t count = input.numel() / std::max<int64_t>(1, channels);
  if (!reducer) {
    EMBER_CHECK(!training || count > 1, op, ": expected more than 1 value per channel when training, got input size ",
                shape_str(input.sizes()));
  }
  const KernelTable& k = kernels_for(input.device(), op);
  Tensor mean, invstd, out;
  {
    NoGradGuard no_grad;
    if (training) {
      auto [batch_mean, batch_var] = k.batch_norm_stats(input);
      if (reducer) {
        reducer->reduce_stats(batch_mean, batch_var, count);
        EMBER_CHECK(count > 1, "SyncBatchNorm: expected more than 1 value per channel over all processes, got ", count);
      }
      mean = batch_mean;
      invstd = (batch_var + eps).rsqrt();
      if (running_mean.defined()) {
        Tensor m = running_mean, v = running_var;  // updated in place: they are the module's buffers
        m.mul_(1.0 - momentum).add_(batch_mean.to(m.dtype()), momentum);
        double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
        v.mul_(1.0 - momentum).add_(batch_var.to(v.dtype()), momentum * unbias);
      }
    } else {
      DType ct = input.dtype() == kFloat64 ? kFloat64 : kFloat32;
      mean = running_mean.to(ct);
      invstd = (running_var.to(ct) + eps).rsqrt();
    }
    out = k.batch_norm_apply(input, mean, invstd, weight, bias, relu);
  }
  if (!needs_grad({&input, &weight, &bias})) return out;
  auto node = std::make_shared<autograd::BatchNormBackward>(input, mean, invstd, weight, training, count,
                                                            training ? reducer : nullptr, relu ? out : Tensor());
  autograd::connect(node, {&input, &weight, &bias});
  return autograd::attach(node, out);
}

}  // namespace

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps,
                  std::shared_ptr<BatchNormStatsReducer> reducer) {
  // Not autocast's to cast: lower-precision activations with float32 statistics and parameters.
  autocast::Hold as_one_op;
  return batch_norm_maybe_relu(input, running_mean, running_var, weight, bias, training, momentum, eps,
                               std::move(reducer), false);
}

Tensor batch_norm_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, bool training, double momentum, double eps,
                       std::shared_ptr<BatchNormStatsReducer> reducer) {
  autocast::Hold as_one_op;
  return batch_norm_maybe_relu(input, running_mean, running_var, weight, bias, training, momentum, eps,
                               std::move(reducer), true);
}

}  // namespace ember
