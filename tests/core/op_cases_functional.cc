// Functional cases: the autograd-level ops composed of other ops (linear, layer_norm, the losses,
// dropout) and Tensor::set_grad, each against a float64 reference written out by hand. Class
// targets come from a few small numbers, and every input has at least that many classes.
#include <algorithm>
#include <cmath>

#include "autograd/functional.h"
#include "tests/core/op_cases.h"

namespace ember::test {

namespace {

using Tensors = std::vector<Tensor>;
using Refs = std::vector<RefTensor>;

constexpr int64_t kClasses = 3;  // target values are 0 .. kClasses - 1
const ValueRange kClassRange{0.0, kClasses - 1.0, true};
const ValueRange kPositiveWeight{0.5, 2.0};

RefTensor ref_scalar(double value, DType dtype) { return RefTensor{{}, dtype, {value}}; }

double ref_sum(const std::vector<double>& values) {
  double s = 0;
  for (double v : values) s += v;
  return s;
}

// ---- linear: input [..., in], weight [out, in], bias [out] ----

ShapeGenerator linear_shapes(bool with_bias) {
  return [=](Rng& rng, OpArgs&, bool allow_empty) {
    const int64_t in = rng.integer(1, 5), out = rng.integer(1, 4);
    Shape input(static_cast<size_t>(rng.integer(1, 3)));
    for (int64_t& s : input) s = allow_empty && rng.chance(0.05) ? 0 : rng.integer(1, 4);
    input.back() = in;
    std::vector<Shape> shapes = {input, {out, in}};
    if (with_bias) shapes.push_back({out});
    return shapes;
  };
}

RefTensor ref_linear(const RefTensor& x, const RefTensor& w, const RefTensor* b) {
  const int64_t out = w.shape[0], in = w.shape[1], rows = x.numel() / in;
  Shape shape = x.shape;
  shape.back() = out;
  RefTensor y{shape, x.dtype, {}};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0;
      for (int64_t k = 0; k < in; ++k) sum += x.values[r * in + k] * w.values[o * in + k];
      y.values.push_back(b ? sum + b->values[o] : sum);
    }
  return y;
}

OpCase linear_case(bool with_bias) {
  OpCase c;
  c.name = with_bias ? "linear_bias" : "linear";
  c.ops = {"linear"};
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-1.0, 1.0}}};
  c.shapes = linear_shapes(with_bias);
  c.sum_terms = [with_bias](const std::vector<Shape>& s, const OpArgs&) { return s[1][1] + with_bias; };
  if (with_bias) c.tolerance_scale = 2.0;  // the product rounds before the bias is added
  c.run = [with_bias](const Tensors& x, const OpArgs&) {
    return Tensors{linear(x[0], x[1], with_bias ? x[2] : Tensor())};
  };
  c.reference = [with_bias](const Refs& x, const OpArgs&) {
    return Refs{ref_linear(x[0], x[1], with_bias ? &x[2] : nullptr)};
  };
  return c;
}

// ---- layer_norm over the last params[0] dims, with weight and bias of their shape ----

constexpr double kLayerNormEps = 1e-5;

ShapeGenerator layer_norm_shapes(bool affine) {
  return [=](Rng& rng, OpArgs& a, bool allow_empty) {
    Shape input(static_cast<size_t>(rng.integer(1, 4)));
    for (int64_t& s : input) s = rng.integer(1, 5);
    const int64_t k = rng.integer(1, static_cast<int64_t>(input.size()));
    if (allow_empty && static_cast<int64_t>(input.size()) > k && rng.chance(0.05)) input[0] = 0;
    a.params = {k};
    std::vector<Shape> shapes = {input};
    if (affine) shapes.insert(shapes.end(), 2, Shape(input.end() - k, input.end()));
    return shapes;
  };
}

OpCase layer_norm_case(bool affine) {
  OpCase c;
  c.name = affine ? "layer_norm_affine" : "layer_norm";
  c.ops = {"layer_norm"};
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-2.0, 2.0}}};
  c.shapes = layer_norm_shapes(affine);
  // Mean, centring, variance, rsqrt and the affine map each round in 16-bit dtypes, and
  // weight * v + bias may cancel.
  c.tolerance_scale = 8.0;
  c.run = [affine](const Tensors& x, const OpArgs& a) {
    const int64_t k = a.params[0];
    const Shape normalized(x[0].sizes().end() - k, x[0].sizes().end());
    return Tensors{affine ? layer_norm(x[0], normalized, x[1], x[2], kLayerNormEps)
                          : layer_norm(x[0], normalized, {}, {}, kLayerNormEps)};
  };
  c.reference = [affine](const Refs& x, const OpArgs& a) {
    const RefTensor& in = x[0];
    const int64_t k = a.params[0];
    const int64_t group = count_elements(Shape(in.shape.end() - k, in.shape.end()));
    RefTensor y{in.shape, in.dtype, std::vector<double>(in.values.size())};
    y.magnitude.resize(in.values.size());  // the normalised value, and the affine map's two terms
    for (int64_t start = 0; start < in.numel(); start += group) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < group; ++i) mean += in.values[start + i] / static_cast<double>(group);
      for (int64_t i = 0; i < group; ++i) var += std::pow(in.values[start + i] - mean, 2) / static_cast<double>(group);
      for (int64_t i = 0; i < group; ++i) {
        double v = (in.values[start + i] - mean) / std::sqrt(var + kLayerNormEps);
        y.values[start + i] = affine ? v * x[1].values[i] + x[2].values[i] : v;
        y.magnitude[start + i] =
            affine ? std::max(std::fabs(v), std::fabs(v * x[1].values[i]) + std::fabs(x[2].values[i])) : std::fabs(v);
      }
    }
    return Refs{y};
  };
  return c;
}

// ---- losses ----

OpCase mse_loss_case(Reduction reduction) {
  OpCase c;
  c.name = reduction == Reduction::None ? "mse_loss_none" : "mse_loss";
  c.ops = {"mse_loss"};
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-2.0, 2.0}}};
  c.shapes = same_shape(2);
  c.allow_empty = false;  // the mean of nothing
  c.tolerance_scale = 2.0;
  c.run = [reduction](const Tensors& x, const OpArgs&) { return Tensors{mse_loss(x[0], x[1], reduction)}; };
  c.reference = [reduction](const Refs& x, const OpArgs&) {
    RefTensor squares =
        ref_elementwise(x, x[0].dtype, [](const std::vector<double>& v) { return (v[0] - v[1]) * (v[0] - v[1]); });
    if (reduction == Reduction::None) return Refs{squares};
    return Refs{ref_scalar(ref_sum(squares.values) / static_cast<double>(squares.numel()), x[0].dtype)};
  };
  return c;
}

// input [N, C] or [N, C, d]; target [N] or [N, d]; with_weight: a class weight [C].
ShapeGenerator classification_shapes(bool with_weight) {
  return [=](Rng& rng, OpArgs&, bool) {
    const int64_t n = rng.integer(1, 4), classes = rng.integer(kClasses, kClasses + 2);
    Shape input = {n, classes}, target = {n};
    if (rng.chance(0.4)) {
      const int64_t d = rng.integer(1, 3);
      input.push_back(d);
      target.push_back(d);
    }
    std::vector<Shape> shapes = {input, target};
    if (with_weight) shapes.push_back({classes});
    return shapes;
  };
}

// Calls fn(row index into target, the input offsets of that row's C values, its target class).
template <class Fn>
void for_each_sample(const RefTensor& input, const RefTensor& target, Fn fn) {
  const int64_t classes = input.shape[1], inner = input.shape.size() > 2 ? input.shape[2] : 1;
  for (int64_t r = 0; r < target.numel(); ++r) {
    const int64_t n = r / inner, d = r % inner;
    std::vector<int64_t> offsets;
    for (int64_t k = 0; k < classes; ++k) offsets.push_back((n * classes + k) * inner + d);
    fn(offsets, static_cast<int64_t>(target.values[r]));
  }
}

// PyTorch's definition, mean reduction: (1 - s) nll + s / C * smooth, each divided by the summed
// weight of the targets; smooth is -sum_c w_c log p_c.
RefTensor ref_cross_entropy(const RefTensor& input, const RefTensor& target, const RefTensor* weight,
                            double smoothing) {
  const int64_t classes = input.shape[1];
  double nll = 0, smooth = 0, total_weight = 0;
  for_each_sample(input, target, [&](const std::vector<int64_t>& at, int64_t t) {
    double max = -INFINITY, sum = 0;
    for (int64_t i : at) max = std::max(max, input.values[i]);
    for (int64_t i : at) sum += std::exp(input.values[i] - max);
    auto log_p = [&](int64_t k) { return input.values[at[k]] - max - std::log(sum); };
    auto w = [&](int64_t k) { return weight ? weight->values[k] : 1.0; };
    nll -= w(t) * log_p(t);
    total_weight += w(t);
    for (int64_t k = 0; k < classes; ++k) smooth -= w(k) * log_p(k);
  });
  const double loss =
      (1 - smoothing) * nll / total_weight + smoothing / static_cast<double>(classes) * smooth / total_weight;
  return ref_scalar(loss, input.dtype);
}

OpCase cross_entropy_case(bool weighted_and_smoothed) {
  constexpr double kSmoothing = 0.2;
  OpCase c;
  c.name = weighted_and_smoothed ? "cross_entropy_weight_smoothing" : "cross_entropy";
  c.ops = {"cross_entropy"};
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-3.0, 3.0}}, InputSpec{kClassRange, kInt64}, InputSpec{kPositiveWeight}};
  c.shapes = classification_shapes(weighted_and_smoothed);
  c.tolerance_scale = 4.0;  // log_softmax, the picks, the sums and the division each round
  c.run = [weighted_and_smoothed](const Tensors& x, const OpArgs&) {
    return Tensors{weighted_and_smoothed ? cross_entropy(x[0], x[1], x[2], Reduction::Mean, -100, kSmoothing)
                                         : cross_entropy(x[0], x[1])};
  };
  c.reference = [weighted_and_smoothed](const Refs& x, const OpArgs&) {
    return Refs{weighted_and_smoothed ? ref_cross_entropy(x[0], x[1], &x[2], kSmoothing)
                                      : ref_cross_entropy(x[0], x[1], nullptr, 0.0)};
  };
  return c;
}

// Summed: -sum_i w[t_i] input[i, t_i] (the input read as log-probabilities).
OpCase nll_loss_case() {
  OpCase c;
  c.name = "nll_loss_weight_sum";
  c.ops = {"nll_loss"};
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-3.0, 0.0}}, InputSpec{kClassRange, kInt64}, InputSpec{kPositiveWeight}};
  c.shapes = classification_shapes(true);
  c.tolerance_scale = 2.0;
  c.run = [](const Tensors& x, const OpArgs&) { return Tensors{nll_loss(x[0], x[1], x[2], Reduction::Sum)}; };
  c.reference = [](const Refs& x, const OpArgs&) {
    double loss = 0;
    for_each_sample(x[0], x[1],
                    [&](const std::vector<int64_t>& at, int64_t t) { loss -= x[2].values[t] * x[0].values[at[t]]; });
    return Refs{ref_scalar(loss, x[0].dtype)};
  };
  return c;
}

// input, target in [0, 1] and weight of one shape (rank >= 1), pos_weight [last dim]; the mean of
// ((1 - t) x + (1 + (p - 1) t) (log(1 + exp(-|x|)) + max(-x, 0))) w.
OpCase binary_cross_entropy_case() {
  OpCase c;
  c.name = "binary_cross_entropy_with_logits";
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-3.0, 3.0}}, InputSpec{{0.0, 1.0}}, InputSpec{kPositiveWeight}, InputSpec{kPositiveWeight}};
  c.shapes = [](Rng& rng, OpArgs&, bool) {
    Shape x(static_cast<size_t>(rng.integer(1, 3)));
    for (int64_t& s : x) s = rng.integer(1, 4);
    return std::vector<Shape>{x, x, x, {x.back()}};
  };
  c.tolerance_scale = 4.0;
  c.run = [](const Tensors& x, const OpArgs&) {
    return Tensors{binary_cross_entropy_with_logits(x[0], x[1], x[2], x[3])};
  };
  c.reference = [](const Refs& x, const OpArgs&) {
    const int64_t last = x[0].shape.back();
    double sum = 0;
    for (int64_t i = 0; i < x[0].numel(); ++i) {
      const double v = x[0].values[i], t = x[1].values[i], p = x[3].values[i % last];
      const double softplus = std::log1p(std::exp(-std::fabs(v))) + std::max(-v, 0.0);
      sum += ((1 - t) * v + (1 + (p - 1) * t) * softplus) * x[2].values[i];
    }
    return Refs{ref_scalar(sum / static_cast<double>(x[0].numel()), x[0].dtype)};
  };
  return c;
}

// ---- dropout and set_grad ----

// Dropout's draws are random, its rule is not: every element is dropped (0) or kept and scaled by
// 1 / (1 - p) = 2, exactly in every floating dtype.
OpCase dropout_case() {
  OpCase c;
  c.name = "dropout";
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-3.0, 3.0}}};
  c.shapes = same_shape(1);
  c.run = [](const Tensors& x, const OpArgs&) {
    Tensor y = dropout(x[0], 0.5, true);
    return Tensors{maximum(y.eq(zeros_like(y)), y.eq(x[0] * 2))};
  };
  c.reference = [](const Refs& x, const OpArgs&) { return Refs{ref_filled(x[0].shape, kBool, 1.0)}; };
  return c;
}

OpCase set_grad_case() {
  OpCase c;
  c.name = "set_grad";
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-3.0, 3.0}}};
  c.shapes = same_shape(2);
  c.run = [](const Tensors& x, const OpArgs&) {
    Tensor leaf = x[0].detach();
    leaf.set_grad(x[1]);
    return Tensors{leaf.grad()};
  };
  c.reference = [](const Refs& x, const OpArgs&) { return Refs{x[1]}; };
  return c;
}

}  // namespace

std::vector<OpCase> functional_cases() {
  return {linear_case(false),
          linear_case(true),
          layer_norm_case(false),
          layer_norm_case(true),
          mse_loss_case(Reduction::Mean),
          mse_loss_case(Reduction::None),
          cross_entropy_case(false),
          cross_entropy_case(true),
          nll_loss_case(),
          binary_cross_entropy_case(),
          dropout_case(),
          set_grad_case()};
}

}  // namespace ember::test
