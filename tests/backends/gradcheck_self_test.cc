// The gradient check's own tests: the table reaches every backward node kind core and the NN
// functions record, and the harness, and every case in it, fails on wrong gradients (on the CPU).
// The table itself runs on every backend in backend_ops_test.cc.
#include <catch2/catch.hpp>

#include <cctype>
#include <set>
#include <string>

#include "autograd/node.h"
#include "tests/autograd/gradcheck.h"

namespace ember::testing {
namespace {

const Device kCpu(kCPU);

// PyTorch's grad_fn naming, as autograd/ops/elementwise.cc applies it: "gelu_tanh" -> "GeluTanhBackward0".
std::string backward_name(const std::string& op) {
  std::string name;
  bool upper = true;
  for (char c : op) {
    if (c == '_') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(c)) : c;
    upper = false;
  }
  return name + "Backward0";
}

void collect_node_names(const Tensor& out, std::set<std::string>& names) {
  std::vector<autograd::Node*> stack;
  std::set<autograd::Node*> seen;
  if (out.grad_fn()) stack.push_back(out.grad_fn().get());
  while (!stack.empty()) {
    autograd::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    names.insert(node->name());
    for (const autograd::Edge& edge : node->next_edges())
      if (edge.valid()) stack.push_back(edge.function.get());
  }
}

TEST_CASE("gradcheck: the table reaches every kind of backward node", "[gradcheck]") {
  std::set<std::string> seen;
  for (const GradCase& c : grad_cases()) {
    Inputs inputs;
    for (const InputSpec& spec : c.inputs) inputs.push_back(zeros(spec.shape, spec.dtype).requires_grad_(true));
    collect_node_names(c.fn(inputs), seen);
  }
  std::vector<std::string> expected = {
      "WhereBackward0", "SumBackward1", "MeanBackward1", "ProdBackward1", "AmaxBackward0", "AminBackward0",
      "NormBackward1", "MaxBackward0", "MinBackward0", "ViewBackward0", "PermuteBackward0", "ExpandBackward0",
      "SliceBackward0", "SelectBackward0", "CatBackward0", "BmmBackward0", "ToCopyBackward0", "CloneBackward0",
      "AccumulateGrad",
      // The NN functions' own nodes (the rest of functional.h composes core ops).
      "ConvolutionBackward0", "MaxPool2DWithIndicesBackward0", "AvgPool2DBackward0", "AdaptiveAvgPool2DBackward0",
      "NativeBatchNormBackward0", "BatchNormReluBackward0", "SoftmaxBackward0", "LogSoftmaxBackward0",
      "GatherBackward0", "ScatterAddBackward0", "EmbeddingBackward0"};
  for (int op = 0; op < kNumUnaryOps; ++op) expected.push_back(backward_name(unary_op_name(static_cast<UnaryOp>(op))));
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow, BinaryOp::Minimum,
                      BinaryOp::Maximum, BinaryOp::AddRelu})
    expected.push_back(backward_name(binary_op_name(op)));
  for (const std::string& name : expected) {
    INFO(name);
    CHECK(seen.count(name) == 1);
  }
}

// Every case can fail: the same op with its gradient scaled by 1 + 100 rtol (1e-4 for most) must
// be caught. Cases whose gradient is identically zero are named; they check exactly that.
TEST_CASE("gradcheck: every case catches a gradient off by 100 times its rtol", "[gradcheck]") {
  const std::set<std::string> zero_gradient = {"unary.sign",
                                               "unary.sign.noncontiguous",
                                               "reduce.var.biased.size_one_dim",
                                               "reduce.prod.two_zeros",
                                               "dropout.p1",
                                               "softmax.size_one_dim",
                                               "softmax.zero_dim",
                                               "softmax.log.size_one_dim",
                                               "softmax.log.zero_dim"};
  for (const GradCase& c : grad_cases()) {
    GradCase scaled = c;
    scaled.fn = [fn = c.fn, scale = 1 + 100 * c.rtol](const Inputs& x) {
      Tensor y = fn(x);
      if (y.requires_grad()) y.register_hook([scale](const Tensor& g) { return g * scale; });
      return y;
    };
    INFO(c.name);
    CHECK(gradcheck(scaled, kCpu).ok == (zero_gradient.count(c.name) == 1));
  }
}

// The harness must be able to fail: each flaw below is one a real formula could have.
TEST_CASE("gradcheck: the harness catches wrong gradients", "[gradcheck]") {
  auto with_hook = [](TensorHook hook) {
    return [hook](const Inputs& x) {
      Tensor y = x[0].exp();
      if (y.requires_grad()) y.register_hook(hook);  // the finite differences run without grad
      return y;
    };
  };
  const std::vector<InputSpec> input = {{.shape = {3, 4}}};
  const GradCase flawed[] = {
      {.name = "flipped_sign", .fn = with_hook([](const Tensor& g) { return -g; }), .inputs = input},
      {.name = "off_by_1e-4", .fn = with_hook([](const Tensor& g) { return g * (1 + 1e-4); }), .inputs = input},
      // Ignoring the upstream gradient is right only for sum(): a random upstream catches it.
      {.name = "ignores_upstream", .fn = with_hook([](const Tensor& g) { return ones_like(g); }), .inputs = input},
      // d(x sin x) without the product rule's second term.
      {.name = "missing_term", .fn = [](const Inputs& x) { return x[0] * x[0].detach().sin(); }, .inputs = input},
  };
  for (const GradCase& c : flawed) {
    INFO(c.name);
    GradCheckResult result = gradcheck(c, kCpu);
    CHECK_FALSE(result.ok);
    CHECK(result.message.find(c.name) != std::string::npos);
  }
  GradCase sound{.name = "sound", .fn = [](const Inputs& x) { return x[0] * x[0].sin(); }, .inputs = input};
  GradCheckResult result = gradcheck(sound, kCpu);
  INFO(result.message);
  CHECK(result.ok);
}

}  // namespace
}  // namespace ember::testing
