// Gradient-check cases for the view ops (each kind of ViewSpec, views of views, views that fall
// back to a copy), the split family whose pieces take different paths back, and cat/stack.
#include "tests/autograd/cases.h"

namespace ember::testing {

namespace {

void add(std::vector<GradCase>& cases, const std::string& name, std::function<Tensor(const Inputs&)> fn,
         std::vector<InputSpec> inputs) {
  cases.push_back({.name = "view." + name, .fn = std::move(fn), .inputs = std::move(inputs)});
}

void add_views(std::vector<GradCase>& cases) {
  const InputSpec m34{.shape = {3, 4}}, t34{.shape = {3, 4}, .layout = Layout::Transposed};
  const InputSpec s234{.shape = {2, 3, 4}, .layout = Layout::Strided};
  add(cases, "view", [](const Inputs& x) { return x[0].view({4, 3}); }, {m34});
  add(cases, "view.infer", [](const Inputs& x) { return x[0].view({2, -1, 2}); }, {m34});
  add(cases, "reshape.copies", [](const Inputs& x) { return x[0].reshape({12}); }, {t34});
  add(cases, "reshape.to_zero_dim", [](const Inputs& x) { return x[0].reshape({}); }, {{.shape = {1, 1}}});
  add(cases, "permute", [](const Inputs& x) { return x[0].permute({2, 0, 1}); }, {s234});
  add(cases, "transpose", [](const Inputs& x) { return x[0].transpose(-1, 0); }, {s234});
  add(cases, "t", [](const Inputs& x) { return x[0].t(); }, {{.shape = {3, 5}, .layout = Layout::Strided}});
  add(cases, "t.one_dim", [](const Inputs& x) { return x[0].t() * x[0]; }, {{.shape = {5}}});
  add(cases, "narrow", [](const Inputs& x) { return x[0].narrow(1, 1, 2); }, {m34});
  add(cases, "narrow.negative_start", [](const Inputs& x) { return x[0].narrow(0, -2, 2); }, {t34});
  add(cases, "slice.step", [](const Inputs& x) { return x[0].slice(1, 0, 5, 2); }, {{.shape = {2, 5}}});
  add(cases, "slice.step_strided", [](const Inputs& x) { return x[0].slice(0, 1, -1, 3); },
      {{.shape = {8, 3}, .layout = Layout::Strided}});
  add(cases, "select", [](const Inputs& x) { return x[0].select(1, -1); }, {s234});
  add(cases, "select.index_operator", [](const Inputs& x) { return x[0][1]; }, {t34});
  add(cases, "expand", [](const Inputs& x) { return x[0].expand({2, 3, 4}); }, {{.shape = {3, 1}}});
  add(cases, "expand.zero_dim", [](const Inputs& x) { return x[0].expand({2, 2}); }, {{.shape = {}}});
  add(cases, "expand.keep_size",
      [](const Inputs& x) {
        return x[0].expand({5, -1, 2});
      },
      {{.shape = {3, 1}, .layout = Layout::Transposed}});
  add(cases, "expand_as", [](const Inputs& x) { return x[0].expand_as(x[1]) * x[1]; }, {{.shape = {4}}, m34});
  add(cases, "squeeze", [](const Inputs& x) { return x[0].squeeze(); }, {{.shape = {3, 1, 4, 1}}});
  add(cases, "squeeze.dim", [](const Inputs& x) { return x[0].squeeze(1).squeeze(0); }, {{.shape = {3, 1, 2}}});
  add(cases, "unsqueeze", [](const Inputs& x) { return x[0].unsqueeze(0).unsqueeze(-1); }, {t34});
  add(cases, "flatten", [](const Inputs& x) { return x[0].flatten(); }, {s234});
  add(cases, "flatten.partial", [](const Inputs& x) { return x[0].flatten(1); }, {{.shape = {2, 3, 4}}});
  add(cases, "unflatten", [](const Inputs& x) { return x[0].unflatten(1, {2, -1}); }, {m34});
  add(cases, "contiguous", [](const Inputs& x) { return x[0].contiguous(); }, {t34});
  add(cases, "contiguous.noop", [](const Inputs& x) { return x[0].contiguous() * x[0]; }, {m34});
  add(cases, "chain", [](const Inputs& x) { return x[0].t().slice(0, 0, 4, 2).select(1, 2).unsqueeze(0); }, {m34});
  // One tensor viewed two ways: the two gradients meet at the same leaf.
  add(cases, "diamond", [](const Inputs& x) { return x[0] * 2.0 + x[0].t(); }, {{.shape = {3, 3}}});
  add(cases, "overlapping_slices", [](const Inputs& x) { return x[0].narrow(0, 0, 3) * x[0].narrow(0, 1, 3); },
      {{.shape = {4, 2}}});
}

void add_splits(std::vector<GradCase>& cases) {
  // Each piece goes through a different op so a gradient routed to the wrong piece shows.
  add(cases, "split.uneven",
      [](const Inputs& x) {
        std::vector<Tensor> p = x[0].split(3, 0);
        return cat({p[0] * 2.0, p[1].exp(), p[2].square()}, 0);
      },
      {{.shape = {7, 3}}});
  add(cases, "split_with_sizes",
      [](const Inputs& x) {
        std::vector<Tensor> p = x[0].split_with_sizes({1, 4}, -1);
        return cat({p[0].sin(), p[1] * -1.0}, -1);
      },
      {{.shape = {2, 5}, .layout = Layout::Transposed}});
  add(cases, "chunk",
      [](const Inputs& x) {
        std::vector<Tensor> p = x[0].chunk(3, 1);
        return cat({p[2].tanh(), p[0] * 3.0, p[1]}, 1);
      },
      {{.shape = {2, 5}}});
  add(cases, "chunk.unused_piece",
      [](const Inputs& x) {
        std::vector<Tensor> p = x[0].chunk(2, 0);
        return p[1].exp();
      },
      {{.shape = {4, 3}, .layout = Layout::Strided}});
  add(cases, "unbind",
      [](const Inputs& x) {
        std::vector<Tensor> p = x[0].unbind(1);
        return stack({p[1] * p[0], p[2].exp(), p[0]}, 0);
      },
      {{.shape = {4, 3}, .layout = Layout::Transposed}});
}

void add_cat_stack(std::vector<GradCase>& cases) {
  auto cat_case = [&](const std::string& name, std::function<Tensor(const Inputs&)> fn, std::vector<InputSpec> inputs) {
    cases.push_back({.name = "cat." + name, .fn = std::move(fn), .inputs = std::move(inputs)});
  };
  cat_case("dim1",
           [](const Inputs& x) {
             return cat({x[0], x[1], x[2]}, 1);
           },
           {{.shape = {2, 3}}, {.shape = {2, 1}}, {.shape = {2, 4}, .layout = Layout::Transposed}});
  cat_case("negative_dim",
           [](const Inputs& x) {
             return cat({x[0], x[1]}, -3);
           },
           {{.shape = {1, 2, 3}, .layout = Layout::Strided}, {.shape = {3, 2, 3}, .layout = Layout::Expanded}});
  cat_case("same_tensor_twice", [](const Inputs& x) { return cat({x[0], x[0].exp()}, 0); }, {{.shape = {2, 2}}});
  cat_case("skips_empty",
           [](const Inputs& x) {
             return cat({x[0], zeros({0}, kFloat64), x[1]}, 0);
           },
           {{.shape = {2, 3}}, {.shape = {1, 3}}});
  cat_case("mixed_precision",
           [](const Inputs& x) {
             return cat({x[0], x[1]}, 0);
           },
           {{.shape = {2, 3}, .dtype = kFloat32}, {.shape = {1, 3}}});
  cat_case("with_constant",
           [](const Inputs& x) {
             return cat({ones({2, 2}, TensorOptions(kFloat64).device(x[0].device())), x[0]}, 1);
           },
           {{.shape = {2, 3}}});
  cases.push_back({.name = "stack.dim0",
                   .fn =
                       [](const Inputs& x) {
                         return stack({x[0], x[1]}, 0);
                       },
                   .inputs = {{.shape = {3, 2}}, {.shape = {3, 2}, .layout = Layout::Transposed}}});
  cases.push_back({.name = "stack.last_dim",
                   .fn =
                       [](const Inputs& x) {
                         return stack({x[0], x[1], x[0]}, -1);
                       },
                   .inputs = {{.shape = {2, 3}, .layout = Layout::Strided}, {.shape = {2, 3}}}});
  cases.push_back(
      {.name = "stack.single", .fn = [](const Inputs& x) { return stack({x[0]}, 1); }, .inputs = {{.shape = {4}}}});
}

}  // namespace

void add_view_cases(std::vector<GradCase>& cases) {
  add_views(cases);
  add_splits(cases);
  add_cat_stack(cases);
}

}  // namespace ember::testing
