// Gradient-check cases for the reductions: each over all dims, one dim, a negative dim and a
// dim subset, with and without keepdim, on contiguous and non-contiguous inputs; prod with
// exact zeros; norms of several orders; max/min along a dim (values, with indices alongside).
#include <limits>
#include <string>

#include "tests/autograd/cases.h"

namespace ember::testing {

namespace {

using Dims = std::vector<int64_t>;
using Reduction = std::function<Tensor(const Tensor&, const Dims&, bool)>;

struct DimChoice {
  std::string name;
  Dims dims;
  bool keepdim;
  Layout layout;
};

// Over a [3, 1, 4, 5] input: every pattern a formula may get wrong when it broadcasts back.
std::vector<DimChoice> dim_choices() {
  return {
      {"all", {}, false, Layout::Contiguous},
      {"all.keepdim", {}, true, Layout::Transposed},
      {"dim0", {0}, false, Layout::Strided},
      {"dim_neg1.keepdim", {-1}, true, Layout::Contiguous},
      {"size_one_dim", {1}, false, Layout::Contiguous},
      {"subset", {0, 2}, false, Layout::Transposed},
      {"subset.keepdim", {3, 1, 0}, true, Layout::Expanded},
  };
}

// skip_size_one: over a single element the unbiased var is 0/0 and std's derivative 1/(2 * 0).
void add_family(std::vector<GradCase>& cases, const std::string& name, const Reduction& reduction, InputSpec input = {},
                bool skip_size_one = false) {
  input.shape = {3, 1, 4, 5};
  for (const DimChoice& choice : dim_choices()) {
    if (skip_size_one && choice.name == "size_one_dim") continue;
    input.layout = choice.layout;
    auto fn = [reduction, choice](const Inputs& x) { return reduction(x[0], choice.dims, choice.keepdim); };
    cases.push_back({.name = "reduce." + name + "." + choice.name, .fn = fn, .inputs = {input}});
  }
}

void add_prod_with_zeros(std::vector<GradCase>& cases) {
  // prod is linear in each element, so central differences stay exact at a zero: these check the
  // three regimes of the formula (no zero, one zero, two zeros in the reduced slice).
  auto along_dim1 = [](const Inputs& x) { return x[0].prod({1}); };
  auto all = [](const Inputs& x) { return x[0].prod(); };
  // Rows of a [3, 4] input: row 0 one zero, row 1 two zeros, row 2 none.
  cases.push_back({.name = "reduce.prod.zeros_per_row",
                   .fn = along_dim1,
                   .inputs = {{.shape = {3, 4}, .low = 0.5, .high = 1.5, .zeros_at = {1, 4, 6}}}});
  cases.push_back({.name = "reduce.prod.one_zero",
                   .fn = all,
                   .inputs = {{.shape = {2, 3}, .low = -1.5, .high = 1.5, .zeros_at = {4}}}});
  cases.push_back({.name = "reduce.prod.two_zeros",
                   .fn = all,
                   .inputs = {{.shape = {2, 3}, .low = -1.5, .high = 1.5, .zeros_at = {0, 5}}}});
  cases.push_back(
      {.name = "reduce.prod.zero_keepdim",
       .fn = [](const Inputs& x) { return x[0].prod({0}, true); },
       .inputs = {{.shape = {3, 2}, .low = 0.5, .high = 1.5, .layout = Layout::Transposed, .zeros_at = {2}}}});
}

void add_max_min_dim(std::vector<GradCase>& cases) {
  for (bool is_max : {true, false}) {
    const std::string op = is_max ? "max" : "min";
    for (int64_t dim : {0, 1, -1}) {
      for (bool keepdim : {false, true}) {
        auto fn = [is_max, dim, keepdim](const Inputs& x) {
          auto [values, indices] = is_max ? x[0].max(dim, keepdim) : x[0].min(dim, keepdim);
          return values;
        };
        std::string name = "reduce." + op + "_dim." + std::to_string(dim) + (keepdim ? ".keepdim" : "");
        cases.push_back(
            {.name = name,
             .fn = fn,
             .inputs = {{.shape = {3, 5, 2}, .layout = dim == 1 ? Layout::Transposed : Layout::Contiguous}}});
      }
    }
    // Over all elements.
    cases.push_back({.name = "reduce." + op + ".all",
                     .fn = [is_max](const Inputs& x) { return is_max ? x[0].max() : x[0].min(); },
                     .inputs = {{.shape = {4, 3}, .layout = Layout::Strided}}});
  }
}

}  // namespace

void add_reduction_cases(std::vector<GradCase>& cases) {
  add_family(cases, "sum", [](const Tensor& x, const Dims& d, bool k) { return x.sum(d, k); });
  add_family(cases, "mean", [](const Tensor& x, const Dims& d, bool k) { return x.mean(d, k); });
  add_family(cases, "prod", [](const Tensor& x, const Dims& d, bool k) { return x.prod(d, k); },
             {.low = 0.5, .high = 1.5});
  add_family(
      cases, "var", [](const Tensor& x, const Dims& d, bool k) { return x.var(d, true, k); }, {}, true);
  add_family(cases, "var.biased", [](const Tensor& x, const Dims& d, bool k) { return x.var(d, false, k); });
  add_family(
      cases, "std.biased", [](const Tensor& x, const Dims& d, bool k) { return x.std(d, false, k); }, {}, true);
  add_family(
      cases, "std", [](const Tensor& x, const Dims& d, bool k) { return x.std(d, true, k); }, {}, true);
  add_family(cases, "norm.p1", [](const Tensor& x, const Dims& d, bool k) { return x.norm(1.0, d, k); },
             {.avoid = {0}});
  add_family(cases, "norm.p2", [](const Tensor& x, const Dims& d, bool k) { return x.norm(2.0, d, k); });
  add_family(cases, "norm.p3", [](const Tensor& x, const Dims& d, bool k) { return x.norm(3.0, d, k); });
  add_family(cases, "norm.inf", [](const Tensor& x, const Dims& d, bool k) {
    return x.norm(std::numeric_limits<double>::infinity(), d, k);
  });
  add_family(cases, "logsumexp", [](const Tensor& x, const Dims& d, bool k) { return x.logsumexp(d, k); },
             {.low = -3, .high = 3});
  add_family(cases, "amax", [](const Tensor& x, const Dims& d, bool k) { return x.amax(d, k); });
  add_family(cases, "amin", [](const Tensor& x, const Dims& d, bool k) { return x.amin(d, k); });
  add_prod_with_zeros(cases);
  add_max_min_dim(cases);
  // Reductions of a CPU leaf give 0-dim CPU tensors that join ops on the case's device; their
  // gradients must come back to the CPU for the CPU graph's backward (a model's loss adding a
  // weight penalty computed on the CPU).
  cases.push_back({.name = "reduce.host_graph",
                   .fn =
                       [](const Inputs& x) {
                         Tensor penalty = (x[1] * x[1]).sum() + x[1].norm(2.0);
                         return (x[0] * penalty).mean({1}) + x[1].amax() * x[0].amax();
                       },
                   .inputs = {{.shape = {2, 3}, .distinct = true}, {.shape = {5}, .distinct = true, .on_host = true}}});
  // 0-dim inputs reduce to themselves.
  cases.push_back({.name = "reduce.sum.zero_dim",
                   .fn = [](const Inputs& x) { return x[0].sum() * x[0].mean(); },
                   .inputs = {{.shape = {}}}});
}

}  // namespace ember::testing
