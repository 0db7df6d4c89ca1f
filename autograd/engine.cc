// The graph walk. Gradient buffers live in a per-call GraphTask; nodes are processed in order
// of decreasing sequence number among the ready ones.
#include "autograd/engine.h"

#include <queue>
#include <string>
#include <unordered_map>

#include "autograd/node.h"
#include "autograd/saved.h"
#include "core/autocast.h"
#include "core/backend.h"
#include "core/device_check.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/profiler.h"

namespace ember::autograd {

namespace {

// The callbacks of the backward pass running in this thread (null when none runs).
thread_local std::vector<std::function<void()>>* current_callbacks = nullptr;
thread_local const PassInfo* current_pass_info = nullptr;

// What a gradient sent along `edge` must look like: the shape, dtype and device of the tensor it
// is the gradient of (for a leaf, the leaf as it is now: set_data may have moved it since its
// sink was made).
OutputMeta input_meta(const Edge& edge) {
  if (const auto* sink = dynamic_cast<const AccumulateGrad*>(edge.function.get())) {
    const Tensor& leaf = sink->leaf();
    return {leaf.sizes(), leaf.dtype(), leaf.device()};
  }
  return edge.function->outputs()[edge.input_nr];
}

// A formula computes in its output's dtype and on its output's device, so the gradient of an
// input of another dtype, or of a 0-dim CPU input that joined an op on a GPU (as the forward
// allows), takes its input's dtype and device here, once for every node (PyTorch's
// validate_outputs). A gradient on another device that is not 0-dim is a wrong formula (or a
// wrong grad_output); `what` names it.
Tensor conform(Tensor grad, const OutputMeta& input, const std::string& what) {
  if (grad.device() != input.device) {
    EMBER_CHECK(grad.dim() == 0, what, " is on ", grad.device().str(), ", but the tensor it is the gradient of is on ",
                input.device.str());
    grad = grad.to(input.device);
  }
  if (grad.dtype() != input.dtype) grad = grad.to(input.dtype);
  return grad;
}

// An error raised in a node's backward, rethrown naming the forward op it is the backward of.
[[noreturn]] void rethrow_from(const Node& node, const Error& e) {
  if (const auto* sink = dynamic_cast<const AccumulateGrad*>(&node)) {
    const Tensor& leaf = sink->leaf();
    EMBER_FAIL("backward: accumulating the gradient of a leaf ", shape_str(leaf.sizes()), " ", dtype_name(leaf.dtype()),
               " on ", leaf.device().str(), ": ", e.what());
  }
  EMBER_FAIL("backward of ", node.forward_op(), " (", node.name(), "): ", e.what());
}

struct ReadyOrder {
  bool operator()(Node* a, Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// Where autograd::grad wants gradients captured instead of accumulated.
struct Capture {
  Node* node;
  uint32_t input_nr;
  size_t slot;
};

class GraphTask {
 public:
  GraphTask(bool retain_graph, std::vector<Capture> captures)
      : retain_graph_(retain_graph), captures_(std::move(captures)), captured_(captures_.size()) {}

  void run(const std::vector<Edge>& roots, std::vector<Tensor> root_grads) {
    // Nested passes (a hook calling backward) keep their own callback lists.
    std::vector<std::function<void()>> callbacks;
    const PassInfo info{retain_graph_, accumulate_};
    struct Restore {
      std::vector<std::function<void()>>* outer;
      const PassInfo* outer_info;
      ~Restore() {
        current_callbacks = outer;
        current_pass_info = outer_info;
      }
    } restore{current_callbacks, current_pass_info};
    current_callbacks = &callbacks;
    current_pass_info = &info;
    walk(roots, std::move(root_grads));
    // A callback may queue further callbacks; run until none is left.
    for (size_t i = 0; i < callbacks.size(); ++i) {
      std::function<void()> callback = callbacks[i];  // the vector may grow while it runs
      callback();
    }
  }

  std::vector<Tensor>& captured() { return captured_; }

 private:
  void walk(const std::vector<Edge>& roots, std::vector<Tensor> root_grads) {
    count_dependencies(roots);
    for (size_t i = 0; i < roots.size(); ++i) {
      if (!roots[i].valid()) continue;
      add_gradient(roots[i], std::move(root_grads[i]));  // conformed by root_gradients
    }
    std::priority_queue<Node*, std::vector<Node*>, ReadyOrder> ready;
    for (const Edge& root : roots)
      if (root.valid() && --dependencies_[root.function.get()] == 0) ready.push(root.function.get());
    while (!ready.empty()) {
      Node* node = ready.top();
      ready.pop();
      for (Node* next : evaluate(node))
        if (--dependencies_[next] == 0) ready.push(next);
    }
  }

  void count_dependencies(const std::vector<Edge>& roots) {
    std::vector<Node*> stack;
    for (const Edge& root : roots) {
      if (!root.valid()) continue;
      Node* node = root.function.get();
      if (dependencies_[node]++ == 0) stack.push_back(node);
    }
    while (!stack.empty()) {
      Node* node = stack.back();
      stack.pop_back();
      for (const Edge& edge : node->next_edges()) {
        if (!edge.valid()) continue;
        if (dependencies_[edge.function.get()]++ == 0) stack.push_back(edge.function.get());
      }
    }
  }

  void add_gradient(const Edge& edge, Tensor grad) {
    for (size_t i = 0; i < captures_.size(); ++i) {
      if (captures_[i].node == edge.function.get() && captures_[i].input_nr == edge.input_nr) {
        Tensor& slot = captured_[captures_[i].slot];
        slot = slot.defined() ? slot + grad : grad;
      }
    }
    auto& buffer = buffers_[edge.function.get()];
    if (buffer.empty()) buffer.resize(edge.function->outputs().size());
    Tensor& slot = buffer[edge.input_nr];
    if (!grad.defined()) return;
    slot = slot.defined() ? slot + grad : std::move(grad);
  }

  // Runs one node; returns the nodes whose dependency count must drop.
  std::vector<Node*> evaluate(Node* node) {
    std::vector<Tensor> grads = std::move(buffers_[node]);
    buffers_.erase(node);
    grads.resize(node->outputs().size());
    std::vector<Node*> visited;
    const bool is_accumulator = dynamic_cast<AccumulateGrad*>(node) != nullptr;
    // autograd::grad returns gradients instead of writing any leaf's .grad.
    if (is_accumulator && !accumulate_) return visited;
    std::shared_lock<std::shared_mutex> in_use(node->use_mutex());
    // Before hooks and retain_grad: a refused pass must leave no trace.
    EMBER_CHECK(!node->released(), node->name(),
                ": trying to backward through the graph a second time (or directly "
                "access saved tensors after they have already been freed). Saved intermediate values of the graph "
                "are freed when you call backward(); specify retain_graph=true if you need to backward through the "
                "graph a second time");
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) {
        const OutputMeta& meta = node->outputs()[i];
        grads[i] = zeros(meta.shape, TensorOptions(meta.dtype).device(meta.device));
      }
    }
    for (const auto& hook : node->pre_hooks()) {
      Tensor replaced = hook.hook(grads[hook.output_nr]);
      if (replaced.defined()) grads[hook.output_nr] = replaced;
    }
    for (auto& [output_nr, weak] : node->retained()) {
      if (auto impl = weak.lock()) {
        Tensor retained(impl);
        AutogradMeta& meta = retained.autograd_meta();
        meta.grad = meta.grad.defined() ? meta.grad + grads[output_nr] : grads[output_nr].clone();
      }
    }
    const bool other_stream = wait_for_stream(node->forward_stream());
    SavedTensor::UsedOnCurrentStream used(other_stream);  // for the saved tensors apply() unpacks
    auto& edges = node->next_edges();
    std::vector<Tensor> input_grads;
    try {
      input_grads = node->apply(std::move(grads));
      EMBER_CHECK(input_grads.size() == edges.size() || is_accumulator, "returned ", input_grads.size(),
                  " gradients for ", edges.size(), " inputs");
      for (size_t i = 0; i < input_grads.size(); ++i) {
        if (!edges[i].valid() || !input_grads[i].defined()) continue;
        const OutputMeta input = input_meta(edges[i]);
        EMBER_CHECK(input_grads[i].sizes() == input.shape, "returned a gradient of shape ",
                    shape_str(input_grads[i].sizes()), " for input ", i, ", of shape ", shape_str(input.shape));
        input_grads[i] = conform(std::move(input_grads[i]), input, "the gradient of input " + std::to_string(i));
      }
    } catch (const Error& e) {
      rethrow_from(*node, e);
    }
    in_use.unlock();
    if (!retain_graph_ && !is_accumulator && node->holds_saved_tensors() && node->release_once()) {
      std::unique_lock<std::shared_mutex> freeing(node->use_mutex());
      node->release_saved();
    }
    for (size_t i = 0; i < edges.size(); ++i) {
      if (!edges[i].valid()) continue;
      if (i < input_grads.size()) add_gradient(edges[i], std::move(input_grads[i]));
      visited.push_back(edges[i].function.get());
    }
    return visited;
  }

 public:
  bool accumulate_ = true;

 private:
  bool retain_graph_;
  std::vector<Capture> captures_;
  std::vector<Tensor> captured_;
  std::unordered_map<Node*, int64_t> dependencies_;
  std::unordered_map<Node*, std::vector<Tensor>> buffers_;
};

std::vector<Tensor> root_gradients(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, const char* op) {
  EMBER_CHECK(grads.empty() || grads.size() == roots.size(), op, ": got ", grads.size(), " gradients for ",
              roots.size(), " outputs");
  std::vector<Tensor> out;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    EMBER_CHECK(root.requires_grad(), op, ": element ", i,
                " of tensors does not require grad and does not have a "
                "grad_fn");
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      EMBER_CHECK(root.numel() == 1, op,
                  ": grad can be implicitly created only for scalar outputs, got an output "
                  "of shape ",
                  shape_str(root.sizes()));
      g = ones_like(root.detach());
    } else {
      EMBER_CHECK(g.sizes() == root.sizes(), op, ": mismatch in shape: grad_output[", i, "] has a shape of ",
                  shape_str(g.sizes()), " and output[", i, "] has a shape of ", shape_str(root.sizes()));
      // A 0-dim gradient may come from another device, as the engine's conform() allows for
      // every gradient (PyTorch's validate_outputs); any other must be on the output's.
      if (g.device() != root.device() && g.dim() != 0)
        device_mismatch(op, root.device(), g.device(),
                        roots.size() == 1 ? std::string("argument 'gradient'") : "gradient " + std::to_string(i));
      // Another dtype is converted, as PyTorch's engine does: backward kernels read the output's.
      g = g.detach().to(root.dtype()).to(root.device());
    }
    out.push_back(g);
  }
  return out;
}

}  // namespace

std::optional<PassInfo> current_pass() {
  if (current_pass_info == nullptr) return std::nullopt;
  return *current_pass_info;
}

void queue_callback(std::function<void()> callback) {
  EMBER_CHECK(current_callbacks != nullptr, "queue_callback: no backward pass is running in this thread");
  current_callbacks->push_back(std::move(callback));
}

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  const profiler::Range range("backward", "backward");
  std::vector<Tensor> root_grads = root_gradients(roots, grads, "backward");
  std::vector<Edge> edges;
  for (const Tensor& root : roots) edges.push_back(gradient_edge(root));
  NoGradGuard no_grad;
  autocast::Hold no_autocast;  // backward formulas compute in the dtypes the forward saved
  GraphTask task(retain_graph, {});
  task.run(edges, std::move(root_grads));
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool allow_unused) {
  std::vector<Tensor> root_grads = root_gradients(outputs, grad_outputs, "grad");
  std::vector<Capture> captures;
  // Held until the walk ends: a leaf's accumulator may have no other owner (the leaf is itself
  // an output), and a freed one would be recreated at a different address for the outputs.
  std::vector<Edge> input_edges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    EMBER_CHECK(inputs[i].requires_grad(), "grad: input ", i, " does not require grad");
    input_edges.push_back(gradient_edge(inputs[i]));
    captures.push_back({input_edges.back().function.get(), input_edges.back().input_nr, i});
  }
  std::vector<Edge> edges;
  for (const Tensor& root : outputs) edges.push_back(gradient_edge(root));
  NoGradGuard no_grad;
  autocast::Hold no_autocast;
  GraphTask task(retain_graph, std::move(captures));
  task.accumulate_ = false;
  task.run(edges, std::move(root_grads));
  std::vector<Tensor> result = std::move(task.captured());
  for (size_t i = 0; i < result.size(); ++i) {
    EMBER_CHECK(result[i].defined() || allow_unused, "grad: one of the differentiated tensors (input ", i,
                ") appears to not have been used in the graph; set allow_unused=true if this is the desired behavior");
  }
  return result;
}

}  // namespace ember::autograd
