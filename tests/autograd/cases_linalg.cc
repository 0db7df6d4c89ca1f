// Gradient-check cases for matmul in every form torch.matmul defines (1-D and 2-D operands,
// batches with broadcast batch dims, transposed and strided operands), mm/bmm, and for the
// copies: clone, contiguous, and dtype casts whose gradient is cast back.
#include "tests/autograd/cases.h"

namespace ember::testing {

namespace {

void add_matmul(std::vector<GradCase>& cases) {
  auto matmul = [](const Inputs& x) { return x[0].matmul(x[1]); };
  struct Operands {
    std::string name;
    InputSpec a, b;
  };
  const std::vector<Operands> forms = {
      {"dot", {.shape = {5}}, {.shape = {5}, .layout = Layout::Strided}},
      {"vector_matrix", {.shape = {4}}, {.shape = {4, 3}}},
      {"matrix_vector", {.shape = {3, 4}}, {.shape = {4}}},
      {"matrix_matrix", {.shape = {3, 4}}, {.shape = {4, 5}}},
      {"outer_like", {.shape = {5, 1}}, {.shape = {1, 2}}},
      {"row_column", {.shape = {1, 3}}, {.shape = {3, 1}}},
      {"transposed_operands",
       {.shape = {3, 4}, .layout = Layout::Transposed},
       {.shape = {4, 2}, .layout = Layout::Transposed}},
      {"strided_operands", {.shape = {2, 3}, .layout = Layout::Strided}, {.shape = {3, 3}, .layout = Layout::Strided}},
      {"expanded_operand", {.shape = {3, 4}, .layout = Layout::Expanded}, {.shape = {4, 2}}},
      {"batched", {.shape = {2, 3, 4}}, {.shape = {2, 4, 5}}},
      {"batched_matrix", {.shape = {2, 3, 4}, .layout = Layout::Transposed}, {.shape = {4, 5}}},
      {"matrix_batched", {.shape = {3, 4}}, {.shape = {2, 4, 5}, .layout = Layout::Strided}},
      {"broadcast_batch", {.shape = {2, 1, 3, 4}}, {.shape = {3, 4, 2}}},
      {"broadcast_batch_both", {.shape = {3, 1, 2, 3}, .layout = Layout::Transposed}, {.shape = {1, 2, 3, 2}}},
      {"vector_batched", {.shape = {4}}, {.shape = {2, 4, 3}}},
      {"batched_vector", {.shape = {2, 3, 4}, .layout = Layout::Transposed}, {.shape = {4}}},
  };
  for (const Operands& form : forms)
    cases.push_back({.name = "matmul." + form.name, .fn = matmul, .inputs = {form.a, form.b}});
  cases.push_back({.name = "matmul.transposed_inside",
                   .fn = [](const Inputs& x) { return x[0].t().matmul(x[1].t()); },
                   .inputs = {{.shape = {4, 3}}, {.shape = {2, 4}}}});
  cases.push_back({.name = "matmul.same_operand",
                   .fn = [](const Inputs& x) { return x[0].matmul(x[0]); },
                   .inputs = {{.shape = {3, 3}}}});
  cases.push_back({.name = "matmul.mm",
                   .fn = [](const Inputs& x) { return ember::mm(x[0], x[1]); },
                   .inputs = {{.shape = {2, 5}}, {.shape = {5, 3}, .layout = Layout::Transposed}}});
  cases.push_back({.name = "matmul.bmm",
                   .fn = [](const Inputs& x) { return ember::bmm(x[0], x[1]); },
                   .inputs = {{.shape = {3, 2, 4}, .layout = Layout::Strided}, {.shape = {3, 4, 1}}}});
  // One operand a constant: only the other one's gradient is computed and saved.
  cases.push_back({.name = "matmul.constant_operand",
                   .fn =
                       [](const Inputs& x) {
                         return x[0].matmul(full({4, 2}, 0.5, TensorOptions(kFloat64).device(x[0].device())));
                       },
                   .inputs = {{.shape = {3, 4}}}});
}

void add_copies(std::vector<GradCase>& cases) {
  cases.push_back({.name = "copy.clone",
                   .fn = [](const Inputs& x) { return x[0].clone() * x[0]; },
                   .inputs = {{.shape = {3, 4}, .layout = Layout::Strided}}});
  cases.push_back({.name = "copy.to_same_dtype",
                   .fn = [](const Inputs& x) { return x[0].to(kFloat64).exp(); },
                   .inputs = {{.shape = {2, 3}}}});
  // A float32 leaf computed on in float64: the float64 gradient is cast back to float32.
  cases.push_back({.name = "copy.to_float64",
                   .fn = [](const Inputs& x) { return x[0].to(kFloat64) * x[1]; },
                   .inputs = {{.shape = {3, 4}, .dtype = kFloat32}, {.shape = {4}}}});
  cases.push_back({.name = "copy.to_float64.transposed",
                   .fn = [](const Inputs& x) { return x[0].to(kFloat64).exp(); },
                   .inputs = {{.shape = {3, 2}, .layout = Layout::Transposed, .dtype = kFloat32}}});
  // float64 -> float32 -> float64 rounds the forward to float32, so the finite difference needs a
  // wider step and carries float32's relative error (~1e-7 / eps); a lost or negated gradient
  // still misses by orders of magnitude.
  cases.push_back({.name = "copy.float32_round_trip",
                   .fn = [](const Inputs& x) { return x[0].to(kFloat32).to(kFloat64) * x[1]; },
                   .inputs = {{.shape = {2, 3}}, {.shape = {3}}},
                   .eps = 1e-3,
                   .rtol = 2e-4,
                   .atol = 1e-6});
}

}  // namespace

void add_linalg_cases(std::vector<GradCase>& cases) {
  add_matmul(cases);
  add_copies(cases);
}

}  // namespace ember::testing
