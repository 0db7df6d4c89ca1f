// Gradient-check cases for in-place ops on tensors that take part in autograd. Ember rebases the
// modified tensor onto the out-of-place result's history (core/elementwise.cc `inplace`); the
// finite differences run the same code with grad mode off, i.e. the direct in-place kernels.
#include "tests/autograd/cases.h"

namespace ember::testing {

void add_inplace_cases(std::vector<GradCase>& cases) {
  cases.push_back({.name = "inplace.add_mul",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0] * 2.0;
                         y.add_(x[1]);
                         y.mul_(x[2]);
                         return y;
                       },
                   .inputs = {{.shape = {3, 4}}, {.shape = {3, 4}}, {.shape = {3, 4}}}});
  cases.push_back({.name = "inplace.sub_div",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0].gelu();  // saves its input, so changing the output is fine
                         y.sub_(x[1], 0.5);
                         y.div_(x[2]);
                         return y;
                       },
                   .inputs = {{.shape = {2, 5}}, {.shape = {2, 5}}, {.shape = {2, 5}, .low = 0.5, .high = 1.5}}});
  // Broadcast operands, and a non-contiguous one.
  cases.push_back({.name = "inplace.broadcast",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0] * 1.5;
                         y.add_(x[1]);
                         y.mul_(x[2]);
                         y.sub_(x[1]);
                         return y;
                       },
                   .inputs = {{.shape = {3, 4}, .layout = Layout::Transposed}, {.shape = {4}}, {.shape = {3, 1}}}});
  // y = 3x - 1 crosses the clamp bounds at x = 1/6 and 1/2 and relu's kink at x = 1/3.
  cases.push_back({.name = "inplace.scalar_clamp_relu",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0] + 0.0;
                         y.mul_(3.0);
                         y.add_(-1.0);
                         y.clamp_(-0.5, 0.5);
                         y.relu_();
                         return y;
                       },
                   .inputs = {{.shape = {4, 5}, .avoid = {1.0 / 6, 1.0 / 3, 0.5}}}});
  cases.push_back({.name = "inplace.operators",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0].sin();
                         y += x[1];
                         y *= x[1];
                         y -= x[0];
                         y /= x[2];
                         return y;
                       },
                   .inputs = {{.shape = {2, 3}}, {.shape = {2, 3}}, {.shape = {3}, .low = 0.5, .high = 2}}});
  // 0-dim CPU operands into a tensor on the case's device.
  cases.push_back({.name = "inplace.host_scalar",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0] * 1.0;
                         y.mul_(x[1]);
                         y.sub_(x[2], 0.5);
                         y.div_(x[1]);
                         return y;
                       },
                   .inputs = {{.shape = {3, 4}},
                              {.shape = {}, .low = 0.5, .high = 1.5, .on_host = true},
                              {.shape = {}, .on_host = true}}});
  // self needs no gradient, the operand does: self joins the graph.
  cases.push_back({.name = "inplace.into_constant",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = zeros({2, 3}, TensorOptions(kFloat64).device(x[0].device()));
                         y.add_(x[0]);
                         y.mul_(x[1]);
                         return y;
                       },
                   .inputs = {{.shape = {2, 3}}, {.shape = {3}}}});
  // copy_ replaces the value: the old history gets nothing, the source gets the (broadcast) gradient.
  cases.push_back({.name = "inplace.copy",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0] * 2.0;
                         y.copy_(x[1]);
                         y.mul_(x[0]);
                         return y;
                       },
                   .inputs = {{.shape = {3, 4}}, {.shape = {4}}}});
  cases.push_back({.name = "inplace.alpha_mixed_precision",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0] * 1.0;
                         y.sub_(x[1], 0.3);
                         y.add_(x[1], 7);
                         return y;
                       },
                   .inputs = {{.shape = {2, 3}}, {.shape = {3}, .dtype = kFloat32}}});
  cases.push_back({.name = "inplace.copy_cast",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0].tanh();
                         y.copy_(x[1]);
                         return y * x[0];
                       },
                   .inputs = {{.shape = {2, 3}}, {.shape = {2, 3}, .dtype = kFloat32}}});
  cases.push_back({.name = "inplace.zero_then_add",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0] * 2.0;
                         y.zero_();
                         y.add_(x[1]);
                         return y;
                       },
                   .inputs = {{.shape = {2, 3}}, {.shape = {2, 3}}}});
  // The value the next op saves is the rebased one, not the value before the in-place op.
  cases.push_back({.name = "inplace.then_saved",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0] * x[1];
                         y.add_(x[1]);
                         return y * y;
                       },
                   .inputs = {{.shape = {5}}, {.shape = {5}}}});
  // In place on the output of reductions and matmul, which core builds as views of a fresh buffer.
  cases.push_back({.name = "inplace.on_reduction",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0].sum({1});
                         y.mul_(x[1]);
                         return y;
                       },
                   .inputs = {{.shape = {3, 4}}, {.shape = {3}}}});
  cases.push_back({.name = "inplace.on_matmul",
                   .fn =
                       [](const Inputs& x) {
                         Tensor y = x[0].matmul(x[1]);
                         y.add_(x[2]);
                         return y;
                       },
                   .inputs = {{.shape = {3, 4}}, {.shape = {4, 2}}, {.shape = {2}}}});
}

}  // namespace ember::testing
