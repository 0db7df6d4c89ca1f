// Graph wiring shared by every differentiable op.
#include "autograd/function.h"

#include "core/backend.h"
#include "core/ops.h"

namespace ember::autograd {

void connect(const std::shared_ptr<Node>& node, std::initializer_list<const Tensor*> inputs) {
  auto& edges = node->next_edges();
  edges.clear();
  for (const Tensor* t : inputs) edges.push_back(t && t->defined() && t->requires_grad() ? gradient_edge(*t) : Edge{});
}

void connect(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs) {
  auto& edges = node->next_edges();
  edges.clear();
  for (const Tensor& t : inputs) edges.push_back(t.defined() && t.requires_grad() ? gradient_edge(t) : Edge{});
}

std::vector<Tensor> attach(const std::shared_ptr<Node>& node, std::vector<Tensor> outputs) {
  node->outputs().clear();
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    if (out.autograd_meta_or_null() != nullptr) {
      // Already someone's tensor (a forward that returned its input): give the op its own alias.
      out = out.detach();
    }
    AutogradMeta& meta = out.autograd_meta();
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
    node->outputs().push_back({out.sizes(), out.dtype(), out.device()});
    if (!node->forward_stream().defined() && out.device().type != DeviceType::CPU)
      node->set_forward_stream(current_stream(out.device()));
  }
  return outputs;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && grad.size(d) != 1)) dims.push_back(d);
  }
  Tensor reduced = dims.empty() ? grad : grad.sum(dims, true);
  return reduced.reshape(shape);
}

}  // namespace ember::autograd
