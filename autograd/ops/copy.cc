// Gradients of dtype/device conversion and clone, and the rebasing of in-place ops.
#include "autograd/function.h"
#include "autograd/ops/ops.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::autograd {

namespace {

class ConvertBackward final : public Node {
 public:
  ConvertBackward(DType dtype, Device device, bool is_clone) : dtype_(dtype), device_(device), is_clone_(is_clone) {}
  std::string name() const override { return is_clone_ ? "CloneBackward0" : "ToCopyBackward0"; }
  std::string forward_op() const override { return is_clone_ ? "clone" : "to"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override { return {grads[0].to(dtype_).to(device_)}; }
  bool holds_saved_tensors() const override { return false; }

 private:
  DType dtype_;
  Device device_;
  bool is_clone_;
};

}  // namespace

Tensor convert(const Tensor& x, DType dtype, Device device) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ember::to_device(ember::to_dtype(x, dtype), device);
  }
  auto node = std::make_shared<ConvertBackward>(x.dtype(), x.device(), false);
  connect(node, {&x});
  return attach(node, y);
}

Tensor clone(const Tensor& x, bool contiguous) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ember::clone(x, contiguous);
  }
  auto node = std::make_shared<ConvertBackward>(x.dtype(), x.device(), true);
  connect(node, {&x});
  return attach(node, y);
}

void rebase_inplace(const Tensor& self, const Tensor& result, const char* op) {
  EMBER_CHECK(!(self.is_leaf() && self.requires_grad()), op,
              ": a leaf Variable that requires grad is being used in "
              "an in-place operation (wrap parameter updates in NoGradGuard)");
  // A view whose memory no other tensor shares (matmul's or a reduction's reshape of a fresh
  // result; a saved tensor also counts as sharing) can take the new history alone. Otherwise its
  // base would keep a stale history, which Ember does not track.
  EMBER_CHECK(!self.unsafe_impl()->is_view || self.storage().use_count() == 1, op,
              ": in-place operation on a view "
              "of a tensor that takes part in autograd is not supported; use the out-of-place form (e.g. x = x.",
              op, "...) instead");
  {
    NoGradGuard no_grad;
    copy_into(self, result);
  }
  self.bump_version();
  AutogradMeta& meta = self.autograd_meta();
  std::shared_ptr<Node> old_fn = meta.grad_fn;
  const AutogradMeta* from = result.autograd_meta_or_null();
  meta.grad_fn = from ? from->grad_fn : nullptr;
  meta.output_nr = from ? from->output_nr : 0;
  if (meta.retains_grad && old_fn) {
    // .grad is the gradient of the tensor's current value (PyTorch's rule), so retain_grad
    // moves to the new history; tensor hooks stay behind, with the value they were given.
    std::erase_if(old_fn->retained(), [&](const auto& entry) { return entry.second.lock() == self.impl_ptr(); });
    if (meta.grad_fn) meta.grad_fn->retained().emplace_back(meta.output_nr, self.impl_ptr());
  }
}

}  // namespace ember::autograd
