// Node bookkeeping and the leaf accumulator.
#include "autograd/node.h"

#include <cctype>
#include <limits>

#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::autograd {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
std::mutex accumulator_creation;
}  // namespace

Node::Node() : sequence_nr_(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

Node::~Node() {
  // A next node whose last owner is this one would be destroyed inside this destructor, and its
  // own next node inside that one: one stack frame per node of a chain. Instead, take such nodes
  // over, strip their edges here, and let each die with no edges left.
  std::vector<std::shared_ptr<Node>> orphans;
  auto adopt_sole_owned = [&orphans](std::vector<Edge>& edges) {
    for (Edge& edge : edges)
      if (edge.function && edge.function.use_count() == 1) orphans.push_back(std::move(edge.function));
    edges.clear();
  };
  adopt_sole_owned(next_edges_);
  while (!orphans.empty()) {
    std::shared_ptr<Node> node = std::move(orphans.back());
    orphans.pop_back();
    adopt_sole_owned(node->next_edges_);
  }
}

std::string Node::forward_op() const {
  std::string camel = name();
  while (!camel.empty() && std::isdigit(static_cast<unsigned char>(camel.back()))) camel.pop_back();
  const std::string suffix = "Backward";
  if (camel.size() > suffix.size() && camel.ends_with(suffix)) camel.resize(camel.size() - suffix.size());
  // A word starts at a capital after a lower-case letter, or at the last capital of a run that
  // a lower-case letter follows: "MaxPool2DWithIndices" -> "max_pool2d_with_indices".
  std::string snake;
  for (size_t i = 0; i < camel.size(); ++i) {
    const auto at = [&](size_t k) { return static_cast<unsigned char>(camel[k]); };
    if (std::isupper(at(i)) && i > 0 &&
        (std::islower(at(i - 1)) || (std::isupper(at(i - 1)) && i + 1 < camel.size() && std::islower(at(i + 1)))))
      snake += '_';
    snake += static_cast<char>(std::tolower(at(i)));
  }
  return snake;
}

// A sink feeds no other node, so running it early delays nothing, and its post-accumulate hooks
// (DDP's all-reduces) start at once. By creation order, an accumulator that an older graph still
// holds (last step's loss kept alive) would wait for the whole walk.
AccumulateGrad::AccumulateGrad(Tensor leaf) : Node(std::numeric_limits<uint64_t>::max()), leaf_(std::move(leaf)) {}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor grad = std::move(grads[0]);
  std::lock_guard<std::mutex> lock(mutex_);
  AutogradMeta& meta = leaf_.autograd_meta();
  for (auto& [id, hook] : meta.hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  NoGradGuard no_grad;
  if (!meta.grad.defined()) {
    // Take the incoming tensor only when nothing else can see its memory: a later accumulation
    // writes into .grad in place.
    bool exclusive = grad.impl_ptr().use_count() == 1 && grad.storage().use_count() == 1;
    if (exclusive && grad.is_contiguous() && grad.dtype() == leaf_.dtype() && grad.storage_offset() == 0) {
      meta.grad = grad;
    } else {
      meta.grad = grad.to(leaf_.dtype()).clone();
    }
  } else {
    meta.grad.add_(grad);
  }
  for (auto& [id, hook] : meta.post_accumulate_hooks) hook(leaf_);
  return {};
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  std::lock_guard<std::mutex> lock(accumulator_creation);
  AutogradMeta& meta = leaf.autograd_meta();
  if (auto existing = meta.grad_accumulator.lock()) return existing;
  auto accumulator = std::make_shared<AccumulateGrad>(leaf);
  OutputMeta out{leaf.sizes(), leaf.dtype(), leaf.device()};
  accumulator->outputs().push_back(out);
  meta.grad_accumulator = accumulator;
  return accumulator;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  const AutogradMeta* meta = t.autograd_meta_or_null();
  if (meta == nullptr) return {};
  if (meta->grad_fn) return {meta->grad_fn, meta->output_nr};
  if (meta->requires_grad) return {grad_accumulator(t), 0};
  return {};
}

}  // namespace ember::autograd
