// Installs the autograd library into core at start-up (this library is alwayslink), so core's
// ops record graphs and Tensor::backward reaches the engine.
#include "autograd/engine.h"
#include "autograd/node.h"
#include "autograd/ops/ops.h"
#include "core/autograd_hooks.h"

namespace ember::autograd {

namespace {

std::atomic<size_t> next_hook_id{1u << 30};  // distinct from leaf hook ids, which count from 1

class EngineHooks final : public AutogradHooks {
 public:
  Tensor unary(UnaryOp op, const Tensor& x, double a, double b) override { return autograd::unary(op, x, a, b); }
  Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) override { return autograd::binary(op, a, b); }
  Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) override { return autograd::where(c, a, b); }
  Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, double p) override {
    return autograd::reduce(op, x, dims, keepdim, p);
  }
  std::pair<Tensor, Tensor> max_min_dim(bool is_max, const Tensor& x, int64_t dim, bool keepdim) override {
    return autograd::max_min_dim(is_max, x, dim, keepdim);
  }
  Tensor view(const Tensor& x, const ViewSpec& spec) override { return autograd::view(x, spec); }
  Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) override { return autograd::cat(tensors, dim); }
  Tensor bmm(const Tensor& a, const Tensor& b) override { return autograd::bmm(a, b); }
  Tensor convert(const Tensor& x, DType dtype, Device device) override { return autograd::convert(x, dtype, device); }
  Tensor clone(const Tensor& x, bool contiguous) override { return autograd::clone(x, contiguous); }
  void rebase_inplace(const Tensor& self, const Tensor& result, const char* op) override {
    autograd::rebase_inplace(self, result, op);
  }
  void backward(const Tensor& root, const Tensor& gradient, bool retain_graph) override {
    autograd::backward({root}, {gradient}, retain_graph);
  }
  size_t register_hook(const Tensor& t, TensorHook hook) override {
    size_t id = next_hook_id.fetch_add(1);
    t.grad_fn()->pre_hooks().push_back({id, t.autograd_meta().output_nr, std::move(hook)});
    return id;
  }
  void remove_hook(const Tensor& t, size_t handle) override {
    if (!t.grad_fn()) return;
    std::erase_if(t.grad_fn()->pre_hooks(), [&](const Node::PreHook& h) { return h.id == handle; });
  }
  void retain_grad(const Tensor& t) override {
    t.grad_fn()->retained().emplace_back(t.autograd_meta().output_nr, t.impl_ptr());
  }
  std::string node_name(const Node& node) override { return node.name(); }
};

const bool installed = [] {
  static EngineHooks hooks;
  set_autograd_hooks(&hooks);
  return true;
}();

}  // namespace

}  // namespace ember::autograd
