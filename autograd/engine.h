// The backward engine: a dependency-counted walk over the graph from the roots, always running
// the ready node created last (so gradients arrive in reverse order of the forward, which is
// the order DDP's buckets expect); leaves' gradient sinks run as soon as they are ready. No recursion: a 10,000-op chain is fine. Each call runs in
// the calling thread with its own bookkeeping, so threads may run independent passes at once.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace ember::autograd {

// Accumulates d(roots)/d(leaf) into every reachable leaf's .grad. `grads` (one per root,
// undefined = ones for a scalar root).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {}, bool retain_graph = false);

// Runs `callback` once the backward pass currently running in this thread has processed every
// node (DDP waits for its all-reduces there, before backward() returns). Raises outside backward.
void queue_callback(std::function<void()> callback);

// The backward pass running in this thread (innermost when nested): a node that runs passes of
// its own (DataParallel's, one per replica) gives them the same settings.
struct PassInfo {
  bool retain_graph = false;
  bool accumulate = true;  // false inside autograd::grad, which writes no .grad
};
std::optional<PassInfo> current_pass();

// Returns d(outputs)/d(inputs) without touching any .grad; an input no output depends on gets
// an undefined tensor when allow_unused, an error otherwise.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false);

}  // namespace ember::autograd
