// Reduction cases: sum/mean/prod/var/std/norm/logsumexp/amax/amin over any subset of dims with
// keepdim, max/min with indices along one dim, and argmax/argmin. Ties must give the first index.
#include <cmath>
#include <limits>

#include "tests/core/op_cases.h"

namespace ember::test {

namespace {

using Values = std::vector<double>;
using Tensors = std::vector<Tensor>;
using Refs = std::vector<RefTensor>;

DType same(DType d) { return d; }
DType sum_result(DType d) { return is_floating(d) ? d : kInt64; }

double total(const Values& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

double variance(const Values& v, int correction) {
  double mean = total(v) / static_cast<double>(v.size());
  double squares = 0;
  for (double x : v) squares += (x - mean) * (x - mean);
  return squares / static_cast<double>(std::max<int64_t>(static_cast<int64_t>(v.size()) - correction, 0));
}

double p_norm(const Values& v, double p) {
  double acc = 0;
  for (double x : v) acc = std::isinf(p) ? std::max(acc, std::fabs(x)) : acc + std::pow(std::fabs(x), p);
  return std::isinf(p) ? acc : std::pow(acc, 1.0 / p);
}

// Position of the first extreme element: later equal elements never win.
double first_extreme_index(const Values& v, bool is_max) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (is_max ? v[i] > v[best] : v[i] < v[best]) best = i;
  return static_cast<double>(best);
}

double extreme(const Values& v, bool is_max) { return v[static_cast<size_t>(first_extreme_index(v, is_max))]; }

// The most elements any output of a reduction over `dims` (empty: all) of `shape` adds up.
int64_t reduced_count(const Shape& shape, const std::vector<int64_t>& dims) {
  if (dims.empty()) return count_elements(shape);
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(static_cast<size_t>(std::max<int64_t>(rank, 1)), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(wrap(d, rank))] = true;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[static_cast<size_t>(d)]) count *= shape[d];
  return count;
}

// logsumexp = max + log(sum exp(x - max)): the two terms round apart in 16-bit dtypes.
double logsumexp(const Values& v, bool magnitude) {
  if (v.empty()) return -std::numeric_limits<double>::infinity();
  double m = extreme(v, true), s = 0;
  for (double x : v) s += std::exp(x - m);
  return magnitude ? std::fabs(m) + std::fabs(std::log(s)) : m + std::log(s);
}

OpCase reduction_case(const std::string& name, std::vector<DType> dtypes, ValueRange range,
                      std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)> op,
                      std::function<double(const Values&)> ref, DType (*result)(DType) = same) {
  OpCase c;
  c.name = name;
  c.dtypes = std::move(dtypes);
  c.inputs = {InputSpec{range}};
  c.shapes = reduction_shapes();
  c.run = [op](const Tensors& x, const OpArgs& a) { return Tensors{op(x[0], a.dims, a.keepdim)}; };
  c.reference = [ref, result](const Refs& x, const OpArgs& a) {
    return Refs{ref_reduce(x[0], a.dims, a.keepdim, result(x[0].dtype), ref)};
  };
  return c;
}

OpCase max_min_with_indices(bool is_max) {
  OpCase c;
  c.name = is_max ? "max_dim" : "min_dim";
  c.ops = {is_max ? "max" : "min"};
  c.dtypes = kAllDTypes;
  c.inputs = {InputSpec{{-2.0, 2.0, true}}};  // few distinct values: plenty of ties
  c.shapes = one_dim_shapes(1);
  c.allow_empty = false;
  c.run = [is_max](const Tensors& x, const OpArgs& a) {
    auto [values, indices] = is_max ? x[0].max(a.dims[0], a.keepdim) : x[0].min(a.dims[0], a.keepdim);
    return Tensors{values, indices};
  };
  c.reference = [is_max](const Refs& x, const OpArgs& a) {
    return Refs{
        ref_reduce(x[0], a.dims, a.keepdim, x[0].dtype, [=](const Values& v) { return extreme(v, is_max); }),
        ref_reduce(x[0], a.dims, a.keepdim, kInt64, [=](const Values& v) { return first_extreme_index(v, is_max); })};
  };
  return c;
}

OpCase arg_extreme(bool is_max, bool with_dim) {
  OpCase c;
  c.name = std::string(is_max ? "argmax" : "argmin") + (with_dim ? "_dim" : "_flat");
  c.ops = {is_max ? "argmax" : "argmin"};
  c.dtypes = kAllDTypes;
  c.inputs = {InputSpec{{-2.0, 2.0, true}}};
  c.shapes = one_dim_shapes(1);
  c.allow_empty = false;
  c.run = [=](const Tensors& x, const OpArgs& a) {
    std::optional<int64_t> dim;
    if (with_dim) dim = a.dims[0];
    return Tensors{is_max ? x[0].argmax(dim, a.keepdim) : x[0].argmin(dim, a.keepdim)};
  };
  // Without a dim the index is into the row-major flattening: one bucket holding every element.
  c.reference = [=](const Refs& x, const OpArgs& a) {
    std::vector<int64_t> dims = with_dim ? a.dims : std::vector<int64_t>{};
    return Refs{
        ref_reduce(x[0], dims, a.keepdim, kInt64, [=](const Values& v) { return first_extreme_index(v, is_max); })};
  };
  return c;
}

}  // namespace

std::vector<OpCase> reduction_cases() {
  const std::vector<DType> floats = kFloatingDTypes, all = kAllDTypes;
  const std::vector<DType> ints_and_bool = {kInt64, kInt32, kUInt8, kBool};
  const ValueRange symmetric{-2.0, 2.0};
  std::vector<OpCase> cases = {
      reduction_case(
          "sum", all, symmetric, [](const Tensor& x, const auto& d, bool k) { return x.sum(d, k); }, total, sum_result),
      reduction_case(
          "mean", floats, symmetric, [](const Tensor& x, const auto& d, bool k) { return x.mean(d, k); },
          [](const Values& v) { return total(v) / static_cast<double>(v.size()); }),
      // Factors near 1 keep products of up to 300 elements finite.
      reduction_case(
          "prod", floats, {0.7, 1.4}, [](const Tensor& x, const auto& d, bool k) { return x.prod(d, k); },
          [](const Values& v) {
            double p = 1;
            for (double x : v) p *= x;
            return p;
          }),
      reduction_case(
          "prod_int", ints_and_bool, {-1.0, 1.0}, [](const Tensor& x, const auto& d, bool k) { return x.prod(d, k); },
          [](const Values& v) {
            double p = 1;
            for (double x : v) p *= x;
            return p;
          },
          sum_result),
      reduction_case(
          "amax", all, symmetric, [](const Tensor& x, const auto& d, bool k) { return x.amax(d, k); },
          [](const Values& v) { return extreme(v, true); }),
      reduction_case(
          "amin", all, symmetric, [](const Tensor& x, const auto& d, bool k) { return x.amin(d, k); },
          [](const Values& v) { return extreme(v, false); }),
      reduction_case(
          "logsumexp", kNumericDTypes, {-3.0, 3.0},
          [](const Tensor& x, const auto& d, bool k) { return x.logsumexp(d, k); },
          [](const Values& v) { return logsumexp(v, false); }, floating_result),
  };
  for (OpCase& c : cases) {
    if (c.name == "amax" || c.name == "amin") c.allow_empty = false;  // extremes of nothing raise
    if (c.name == "sum" || c.name == "mean")
      c.sum_terms = [](const std::vector<Shape>& s, const OpArgs& a) { return reduced_count(s[0], a.dims); };
    if (c.name == "logsumexp") {
      c.tolerance_scale = 4;  // shift, exp, sum and log each round in 16-bit dtypes
      c.reference = [](const Refs& x, const OpArgs& a) {
        RefTensor out = ref_reduce(x[0], a.dims, a.keepdim, floating_result(x[0].dtype),
                                   [](const Values& v) { return logsumexp(v, false); });
        out.magnitude =
            ref_reduce(x[0], a.dims, a.keepdim, kFloat64, [](const Values& v) { return logsumexp(v, true); }).values;
        return Refs{out};
      };
    }
    if (c.name == "prod_int") c.ops = {"prod"};
  }
  for (int unbiased = 0; unbiased <= 1; ++unbiased) {
    for (int is_std = 0; is_std <= 1; ++is_std) {
      std::string name = std::string(is_std ? "std" : "var") + (unbiased ? "_unbiased" : "_biased");
      OpCase c = reduction_case(
          name, floats, symmetric,
          [=](const Tensor& x, const auto& d, bool k) {
            return is_std ? x.std(d, unbiased, k) : x.var(d, unbiased, k);
          },
          [=](const Values& v) {
            double var = variance(v, unbiased);
            return is_std ? std::sqrt(var) : var;
          });
      c.ops = {is_std ? "std" : "var"};
      cases.push_back(c);
    }
  }
  // Far from zero, where sum(x^2) - n mean^2 loses every digit in float32: one Welford pass in
  // double keeps the variance of values in [1000, 1002] exact to the output's rounding.
  cases.push_back(calling({"var"}, reduction_case(
                                       "var_offset", floats, {1000.0, 1002.0},
                                       [](const Tensor& x, const auto& d, bool k) { return x.var(d, true, k); },
                                       [](const Values& v) { return variance(v, 1); })));
  const double infinity = std::numeric_limits<double>::infinity();
  for (double p : {1.0, 2.0, 3.0, infinity}) {
    std::string name = "norm_p" + (std::isinf(p) ? std::string("inf") : std::to_string(static_cast<int>(p)));
    cases.push_back(calling(
        {"norm"}, reduction_case(
                      name, floats, symmetric, [=](const Tensor& x, const auto& d, bool k) { return x.norm(p, d, k); },
                      [=](const Values& v) { return p_norm(v, p); })));
  }
  for (bool is_max : {true, false}) {
    cases.push_back(max_min_with_indices(is_max));
    cases.push_back(arg_extreme(is_max, true));
    cases.push_back(arg_extreme(is_max, false));
  }
  return cases;
}

}  // namespace ember::test
