// Recording an op in the graph: make a node, point its edges at the inputs' gradient sinks,
// and make it the grad_fn of the outputs.
//
//   auto node = std::make_shared<MulBackward>(...);
//   connect(node, {&a, &b});
//   return attach(node, {result});
#pragma once

#include <initializer_list>
#include <memory>
#include <vector>

#include "autograd/node.h"

namespace ember::autograd {

// Sets node's next edges from the inputs (an input that needs no gradient gets an invalid edge).
void connect(const std::shared_ptr<Node>& node, std::initializer_list<const Tensor*> inputs);
void connect(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs);

// Makes node the grad_fn of each output (output i is node output i) and returns the outputs.
// An output that aliases an input's TensorImpl is replaced by a fresh alias first.
std::vector<Tensor> attach(const std::shared_ptr<Node>& node, std::vector<Tensor> outputs);
inline Tensor attach(const std::shared_ptr<Node>& node, Tensor output) {
  return attach(node, std::vector<Tensor>{std::move(output)})[0];
}

// Whether input i of a node will receive a gradient (its edge is valid).
inline bool needs_input_grad(const Node& node, size_t i) {
  return i < const_cast<Node&>(node).next_edges().size() && const_cast<Node&>(node).next_edges()[i].valid();
}

// Reduces a broadcast gradient back to `shape` (sums the expanded dims).
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace ember::autograd
