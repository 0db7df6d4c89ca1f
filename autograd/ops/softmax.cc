// softmax and log_softmax along a dim, with the backward computed from the forward output.
#include "autograd/function.h"
#include "autograd/functional.h"
#include "core/autocast.h"
#include "autograd/saved.h"
#include "core/autograd_hooks.h"
#include "core/backend.h"
#include "core/grad_mode.h"

namespace ember {

namespace autograd {
namespace {

class SoftmaxBackward final : public Node {
 public:
  SoftmaxBackward(const Tensor& output, int64_t dim, bool log) : output_(output), dim_(dim), log_(log) {}
  std::string name() const override { return log_ ? "LogSoftmaxBackward0" : "SoftmaxBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {kernels_for(grads[0].device(), "softmax backward")
                .softmax_backward(grads[0], output_.unpack(name()), dim_, log_)};
  }
  void release_saved() override { output_.reset(); }

 private:
  SavedTensor output_;
  int64_t dim_;
  bool log_;
};

Tensor softmax_impl(const Tensor& x, int64_t dim_in, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  EMBER_CHECK(is_floating(x.dtype()), op, ": expected a floating input, got ", dtype_name(x.dtype()));
  int64_t dim = wrap_dim(dim_in, x.dim(), op);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = kernels_for(x.device(), op).softmax(x, dim, log);
  }
  if (!needs_grad({&x})) return out;
  auto node = std::make_shared<SoftmaxBackward>(out, dim, log);
  connect(node, {&x});
  return attach(node, out);
}

}  // namespace
}  // namespace autograd

Tensor softmax(const Tensor& x, int64_t dim) {
  if (autocast::Scope cast{autocast::Op::softmax, {&x}}) return softmax(cast[0], dim);
  return autograd::softmax_impl(x, dim, false);
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  if (autocast::Scope cast{autocast::Op::log_softmax, {&x}}) return log_softmax(cast[0], dim);
  return autograd::softmax_impl(x, dim, true);
}

}  // namespace ember
