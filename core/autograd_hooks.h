// The interface through which core's differentiable ops reach the autograd library without
// depending on it (PyTorch's VariableHooks idea). The autograd library installs one instance at
// start-up. A core op consults it only when grad mode is on and an input requires grad; the
// implementation computes the forward by calling back into core under a NoGradGuard and records
// a node. Tensor methods that need the engine (backward, grad_fn names) also come through here.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/op_kinds.h"
#include "core/tensor.h"
#include "core/view_spec.h"

namespace ember {

class AutogradHooks {
 public:
  virtual ~AutogradHooks() = default;
  virtual Tensor unary(UnaryOp op, const Tensor& x, double a, double b) = 0;
  virtual Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) = 0;
  virtual Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) = 0;
  virtual Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, double p) = 0;
  virtual std::pair<Tensor, Tensor> max_min_dim(bool is_max, const Tensor& x, int64_t dim, bool keepdim) = 0;
  virtual Tensor view(const Tensor& x, const ViewSpec& spec) = 0;
  virtual Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) = 0;
  virtual Tensor bmm(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor convert(const Tensor& x, DType dtype, Device device) = 0;
  virtual Tensor clone(const Tensor& x, bool contiguous) = 0;
  // In-place op on `self` while grad mode is on and self or an input requires grad:
  // `out_of_place` is the recorded result whose value and history `self` takes over.
  virtual void rebase_inplace(const Tensor& self, const Tensor& out_of_place, const char* op) = 0;
  virtual void backward(const Tensor& root, const Tensor& gradient, bool retain_graph) = 0;
  // Hooks and retain_grad on non-leaf tensors live on their grad_fn.
  virtual size_t register_hook(const Tensor& t, TensorHook hook) = 0;
  virtual void remove_hook(const Tensor& t, size_t handle) = 0;
  virtual void retain_grad(const Tensor& t) = 0;
  virtual std::string node_name(const autograd::Node& node) = 0;
};

void set_autograd_hooks(AutogradHooks* hooks);
AutogradHooks* autograd_hooks();  // null when the autograd library is not linked

// True when an op on these inputs must go through the autograd hooks.
inline bool any_requires_grad(const Tensor& a) { return a.defined() && a.autograd_meta_or_null() && a.requires_grad(); }
bool needs_grad(std::initializer_list<const Tensor*> inputs);

}  // namespace ember
