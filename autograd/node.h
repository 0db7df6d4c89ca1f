// The autograd graph: a Node is the backward of one recorded op (a tensor's grad_fn). Edges
// point from a node to the nodes that produced its inputs; leaves end in AccumulateGrad.
//
//   y = x * w             // records MulBackward with edges to x's and w's gradient sinks
//   y.sum().backward();   // the engine walks the nodes in reverse creation order
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime.h"
#include "core/tensor.h"

namespace ember::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;  // which of function's gradient inputs this edge feeds
  bool valid() const { return function != nullptr; }
};

// What a node's output looked like, so a missing gradient can become zeros of the right shape.
struct OutputMeta {
  Shape shape;
  DType dtype = kFloat32;
  Device device;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();  // iterative: dropping a 100,000-node chain must not recurse once per node
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  virtual std::string name() const = 0;
  // The op whose backward this is, as the user called it ("mul", "conv2d"), for the engine's
  // error messages. By default name() without "Backward<N>", in snake case.
  virtual std::string forward_op() const;
  // grads[i] is the gradient of output i (never undefined: the engine fills zeros). Returns one
  // gradient per next edge, undefined where no gradient flows.
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  // Frees what apply() needs, after a backward without retain_graph.
  virtual void release_saved() {}
  // False for a node that keeps no tensor (a dtype or device conversion): a backward frees nothing
  // in it, so later passes may run through it again, as PyTorch allows. Autocast's cached casts
  // need that: every forward under one guard (accumulated gradients, a pipeline's micro-batches)
  // shares the node of a weight's cast.
  virtual bool holds_saved_tensors() const { return true; }

  uint64_t sequence_nr() const { return sequence_nr_; }
  std::vector<Edge>& next_edges() { return next_edges_; }
  std::vector<OutputMeta>& outputs() { return outputs_; }
  // Backward passes may run through one node at once (DataParallel's replicas share the
  // broadcast of the parameters): apply() runs under a shared lock of use_mutex(), and a pass
  // without retain_graph frees the saved tensors under the exclusive lock, after every pass still
  // inside apply() has left. Exactly one pass frees them: the one whose release_once() is true.
  bool released() const { return released_.load(); }
  bool release_once() { return !released_.exchange(true); }
  std::shared_mutex& use_mutex() { return use_mutex_; }

  // The stream the forward ran on (its first output's device's current stream, core/runtime.h);
  // undefined on the CPU.
  const Stream& forward_stream() const { return forward_stream_; }
  void set_forward_stream(Stream stream) { forward_stream_ = std::move(stream); }

  // Hooks on the gradient of one output (registered through a non-leaf tensor).
  struct PreHook {
    size_t id;
    uint32_t output_nr;
    TensorHook hook;
  };
  std::vector<PreHook>& pre_hooks() { return pre_hooks_; }
  // Non-leaf tensors that asked for retain_grad(): their .grad is set when the gradient passes.
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>>& retained() { return retained_; }

 protected:
  // A fixed sequence number instead of the next one from the global counter.
  explicit Node(uint64_t sequence_nr) : sequence_nr_(sequence_nr) {}

 private:
  uint64_t sequence_nr_;
  std::vector<Edge> next_edges_;
  std::vector<OutputMeta> outputs_;
  std::vector<PreHook> pre_hooks_;
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained_;
  std::atomic<bool> released_{false};
  std::shared_mutex use_mutex_;
  Stream forward_stream_;
};

// The sink of a leaf tensor: adds the incoming gradient to leaf.grad, running the leaf's tensor
// hooks first and its post-accumulate hooks after. It has the highest sequence number, so the
// engine runs it as soon as it is ready, even when it was created for an older graph. Thread-safe: two backward passes (e.g. two
// DataParallel replicas sharing an input) may accumulate into one leaf.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
  std::mutex mutex_;
};

// The edge a gradient for `t` must take: its grad_fn, its leaf accumulator, or none.
Edge gradient_edge(const Tensor& t);
// The AccumulateGrad of a leaf that requires grad, created on first use.
std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);

}  // namespace ember::autograd
