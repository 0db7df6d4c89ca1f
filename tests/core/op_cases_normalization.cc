// Normalisation cases: batch norm through the public ops (training with the running-stat update,
// evaluation, the fused ReLU, with and without weight and bias; bf16 activations with float32
// parameters, forward and backward, as autocast runs it) and through the kernel table's four
// halves (statistics, backward sums, input gradient; SyncBatchNorm calls them apart), softmax and
// log-softmax along any dim (large magnitudes, -inf entries, rows long enough for a block each) and
// their backward. Long channels and rows reach the kernels' split and block-per-row paths.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/functional.h"
#include "core/backend.h"
#include "tests/core/op_cases.h"

namespace ember::test {

namespace {

using Tensors = std::vector<Tensor>;
using Refs = std::vector<RefTensor>;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

DType compute_dtype(DType d) { return d == kFloat64 ? kFloat64 : kFloat32; }

// ---- batch norm: [N, C, *] activations and [C] per-channel tensors ----

// `activations` inputs of one [N, C, *] shape, then `per_channel` inputs of shape [C]; at least
// `min_count` values per channel (training needs two).
ShapeGenerator batch_norm_shapes(int activations, int per_channel, int64_t min_count) {
  return [=](Rng& rng, OpArgs&, bool allow_empty) {
    static const std::vector<int64_t> sizes = {1, 2, 3, 4, 5, 7};
    Shape x;
    do {
      x.assign(static_cast<size_t>(rng.integer(2, 4)), 1);
      for (int64_t& s : x) s = rng.pick(sizes);
      while (count_elements(x) > 300) *std::max_element(x.begin(), x.end()) /= 2;
      if (allow_empty && rng.chance(0.08)) x[x.size() > 2 && rng.chance(0.5) ? x.size() - 1 : 0] = 0;
    } while (count_elements(x) / x[1] < min_count);
    std::vector<Shape> shapes(static_cast<size_t>(activations), x);
    for (int i = 0; i < per_channel; ++i) shapes.push_back({x[1]});
    return shapes;
  };
}

// Channels long enough that the reductions split each over several blocks (more than 8192
// values a channel), in both dense layouts once the harness transposes them.
ShapeGenerator long_channel_shapes(int activations, int per_channel) {
  return [=](Rng& rng, OpArgs&, bool) {
    static const std::vector<Shape> shapes = {{2, 3, 4200}, {2, 2, 64, 66}, {1, 5, 90, 96}, {9000, 2}};
    const Shape x = rng.pick(shapes);
    std::vector<Shape> out(static_cast<size_t>(activations), x);
    for (int i = 0; i < per_channel; ++i) out.push_back({x[1]});
    return out;
  };
}

int64_t spatial_size(const Shape& x) {
  int64_t s = 1;
  for (size_t d = 2; d < x.size(); ++d) s *= x[d];
  return s;
}

// The channel of row-major element i of an [N, C, *] tensor.
int64_t channel_of(const Shape& x, int64_t i) { return (i / spatial_size(x)) % x[1]; }

// Per-channel mean and biased variance, two passes in double.
std::pair<std::vector<double>, std::vector<double>> ref_moments(const RefTensor& x) {
  const int64_t channels = x.shape[1];
  std::vector<double> sum(channels, 0.0), squares(channels, 0.0), count(channels, 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    sum[channel_of(x.shape, i)] += x.values[i];
    count[channel_of(x.shape, i)] += 1;
  }
  for (int64_t c = 0; c < channels; ++c) sum[c] /= count[c];  // 0/0 = NaN for no values
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double d = x.values[i] - sum[channel_of(x.shape, i)];
    squares[channel_of(x.shape, i)] += d * d;
  }
  for (int64_t c = 0; c < channels; ++c) squares[c] /= count[c];
  return {sum, squares};
}

RefTensor ref_per_channel(const std::vector<double>& values, DType dtype) {
  return RefTensor{{static_cast<int64_t>(values.size())}, dtype, values};
}

// y = (x - mean) / sqrt(var + eps) * weight + bias, then ReLU.
RefTensor ref_normalise(const RefTensor& x, const std::vector<double>& mean, const std::vector<double>& var,
                        const RefTensor* weight, const RefTensor* bias, double eps, bool relu) {
  RefTensor y{x.shape, x.dtype, std::vector<double>(x.values.size()), std::vector<double>(x.values.size())};
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = channel_of(x.shape, i);
    const double invstd = 1 / std::sqrt(var[c] + eps);
    double v = (x.values[i] - mean[c]) * invstd;
    // Kernels compute x * scale + shift in float32, which cancels where x is near the mean: the
    // rounding is relative to the parts, not to their (possibly zero) difference.
    double m = (std::fabs(x.values[i]) + std::fabs(mean[c])) * invstd;
    if (weight) {
      v *= weight->values[c];
      m *= std::fabs(weight->values[c]);
    }
    if (bias) {
      v += bias->values[c];
      m += std::fabs(bias->values[c]);
    }
    y.values[i] = relu && v < 0 ? 0.0 : v;
    y.magnitude[i] = m;
  }
  return y;
}

// Which of batch norm's optional parts a case has. `mixed`: autocast's batch norm, bf16 or f16 activations
// with float32 running statistics, weight and bias, on channel counts that leave the vector loops
// partial vectors (16 lanes or 8) and planes longer than their blocks.
struct BatchNormForm {
  std::string name;
  bool training, relu, weight, bias, running;
  bool mixed = false;
};

ShapeGenerator mixed_batch_norm_shapes(int activations, int per_channel) {
  return [=](Rng& rng, OpArgs&, bool) {
    static const std::vector<Shape> shapes = {{3, 37, 2, 3}, {2, 20, 5},   {4, 70, 3},   {2, 16, 4, 4},
                                              {5, 9, 3, 1},  {2, 3, 1100}, {2, 5, 7, 9}, {130, 24}};
    const Shape x = rng.pick(shapes);
    std::vector<Shape> out(static_cast<size_t>(activations), x);
    for (int i = 0; i < per_channel; ++i) out.push_back({x[1]});
    return out;
  };
}

constexpr double kMomentum = 0.2, kEps = 1e-3;

// Inputs: x, then running_mean and running_var (when running or evaluating), weight, bias.
OpCase batch_norm_case(const BatchNormForm& f) {
  OpCase c;
  c.name = f.name;
  c.ops = {f.relu ? "batch_norm_relu" : "batch_norm"};
  c.dtypes = f.mixed ? std::vector<DType>{kBFloat16, kFloat16} : kFloatingDTypes;
  const bool running = f.running || !f.training;
  const std::optional<DType> per_channel_dtype = f.mixed ? std::optional<DType>(kFloat32) : std::nullopt;
  c.inputs = {InputSpec{{-2.0, 2.0}}};
  if (running) {
    c.inputs.push_back(InputSpec{{-1.0, 1.0}, per_channel_dtype});
    c.inputs.push_back(InputSpec{{0.2, 2.0}, per_channel_dtype});
  }
  if (f.weight) c.inputs.push_back(InputSpec{{-1.5, 1.5}, per_channel_dtype});
  if (f.bias) c.inputs.push_back(InputSpec{{-1.0, 1.0}, per_channel_dtype});
  const int per_channel = static_cast<int>(c.inputs.size()) - 1;
  c.shapes = f.mixed ? mixed_batch_norm_shapes(1, per_channel) : batch_norm_shapes(1, per_channel, f.training ? 2 : 0);
  c.allow_empty = !f.training;  // training needs two values per channel
  // The running statistics round in the op's dtype at each of mul_ and add_.
  c.tolerance_scale = f.running ? 2.0 : 1.0;
  c.run = [f, running](const Tensors& in, const OpArgs&) {
    size_t next = 1;
    Tensor mean, var, weight, bias;
    if (running) {
      mean = in[next++].clone();  // updated in place: the inputs themselves must stay untouched
      var = in[next++].clone();
    }
    if (f.weight) weight = in[next++];
    if (f.bias) bias = in[next++];
    auto normalise = f.relu ? batch_norm_relu : batch_norm;
    Tensor y = normalise(in[0], mean, var, weight, bias, f.training, kMomentum, kEps, nullptr);
    return f.training && f.running ? Tensors{y, mean, var} : Tensors{y};
  };
  c.reference = [f, running](const Refs& in, const OpArgs&) {
    const RefTensor& x = in[0];
    size_t next = 1;
    const RefTensor* running_mean = running ? &in[next++] : nullptr;
    const RefTensor* running_var = running ? &in[next++] : nullptr;
    const RefTensor* weight = f.weight ? &in[next++] : nullptr;
    const RefTensor* bias = f.bias ? &in[next++] : nullptr;
    if (!f.training)
      return Refs{ref_normalise(x, running_mean->values, running_var->values, weight, bias, kEps, f.relu)};
    auto [mean, var] = ref_moments(x);
    Refs out{ref_normalise(x, mean, var, weight, bias, kEps, f.relu)};
    if (f.running) {
      const double count = static_cast<double>(x.numel() / x.shape[1]);
      RefTensor new_mean = *running_mean, new_var = *running_var;
      // Each term rounds apart in a 16-bit dtype before they add, and they may cancel.
      new_mean.magnitude.resize(mean.size());
      new_var.magnitude.resize(mean.size());
      for (size_t ch = 0; ch < mean.size(); ++ch) {
        const double old_mean = (1 - kMomentum) * running_mean->values[ch], batch_mean = kMomentum * mean[ch];
        const double old_var = (1 - kMomentum) * running_var->values[ch];
        const double batch_var = kMomentum * var[ch] * count / (count - 1);
        new_mean.values[ch] = old_mean + batch_mean;
        new_var.values[ch] = old_var + batch_var;
        new_mean.magnitude[ch] = std::fabs(old_mean) + std::fabs(batch_mean);
        new_var.magnitude[ch] = std::fabs(old_var) + std::fabs(batch_var);
      }
      out.push_back(new_mean);
      out.push_back(new_var);
    }
    return out;
  };
  return c;
}

// The kernel table's statistics: mean and biased variance in the compute dtype. No values give
// mean 0 and variance NaN.
OpCase batch_norm_stats_case(const std::string& name, ValueRange range, ShapeGenerator shapes) {
  OpCase c;
  c.name = name;
  c.kernel_table = true;
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{range}};
  c.shapes = std::move(shapes);
  c.run = [](const Tensors& in, const OpArgs&) {
    auto [mean, var] = kernels_for(in[0].device(), "batch_norm").batch_norm_stats(in[0]);
    return Tensors{mean, var};
  };
  c.reference = [](const Refs& in, const OpArgs&) {
    auto [mean, var] = ref_moments(in[0]);
    for (double& m : mean)
      if (std::isnan(m)) m = 0.0;
    const DType dtype = compute_dtype(in[0].dtype);
    return Refs{ref_per_channel(mean, dtype), ref_per_channel(var, dtype)};
  };
  return c;
}

// dy counts where the fused ReLU's output is > 0 (all of it without one).
double masked_grad(const Refs& in, bool relu, int64_t i) {
  return relu && !(in[2].values[i] > 0) ? 0.0 : in[0].values[i];
}

// Inputs: dy, x, [relu_output], mean. Outputs sum(dy), sum(dy * (x - mean)) in the compute dtype.
OpCase batch_norm_backward_reduce_case(const std::string& name, bool relu, ShapeGenerator shapes) {
  OpCase c;
  c.name = name;
  c.kernel_table = true;
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-2.0, 2.0}}, InputSpec{{-2.0, 2.0}}};
  if (relu) c.inputs.push_back(InputSpec{{-1.0, 1.0}});
  c.inputs.push_back(InputSpec{{-1.0, 1.0}});
  c.shapes = std::move(shapes);
  c.run = [relu](const Tensors& in, const OpArgs&) {
    const KernelTable& kernels = kernels_for(in[0].device(), "batch_norm backward");
    auto [sum_dy, sum_dy_xmu] =
        kernels.batch_norm_backward_reduce(in[0], in[1], in[relu ? 3 : 2], relu ? in[2] : Tensor());
    return Tensors{sum_dy, sum_dy_xmu};
  };
  c.reference = [relu](const Refs& in, const OpArgs&) {
    const RefTensor& x = in[1];
    const RefTensor& mean = in[relu ? 3 : 2];
    std::vector<double> sum_dy(x.shape[1], 0.0), sum_dy_xmu(x.shape[1], 0.0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t ch = channel_of(x.shape, i);
      const double g = masked_grad(in, relu, i);
      sum_dy[ch] += g;
      sum_dy_xmu[ch] += g * (x.values[i] - mean.values[ch]);
    }
    const DType dtype = compute_dtype(x.dtype);
    return Refs{ref_per_channel(sum_dy, dtype), ref_per_channel(sum_dy_xmu, dtype)};
  };
  return c;
}

// Inputs: dy, x, [relu_output], mean, invstd, [weight], sum_dy, sum_dy_xmu; count = N * S.
OpCase batch_norm_backward_input_case(const std::string& name, bool relu, bool weight) {
  OpCase c;
  c.name = name;
  c.kernel_table = true;
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-2.0, 2.0}}, InputSpec{{-2.0, 2.0}}};
  if (relu) c.inputs.push_back(InputSpec{{-1.0, 1.0}});
  c.inputs.push_back(InputSpec{{-1.0, 1.0}});  // mean
  c.inputs.push_back(InputSpec{{0.5, 2.0}});   // invstd
  if (weight) c.inputs.push_back(InputSpec{{-1.5, 1.5}});
  c.inputs.push_back(InputSpec{{-3.0, 3.0}});  // sum_dy
  c.inputs.push_back(InputSpec{{-3.0, 3.0}});  // sum_dy_xmu
  c.shapes = batch_norm_shapes(relu ? 3 : 2, static_cast<int>(c.inputs.size()) - (relu ? 3 : 2), 0);
  c.run = [relu, weight](const Tensors& in, const OpArgs&) {
    size_t next = relu ? 3 : 2;
    const Tensor& mean = in[next++];
    const Tensor& invstd = in[next++];
    const Tensor w = weight ? in[next++] : Tensor();
    const Tensor& sum_dy = in[next++];
    const Tensor& sum_dy_xmu = in[next++];
    const int64_t count = in[1].numel() / std::max<int64_t>(1, in[1].size(1));
    return Tensors{kernels_for(in[0].device(), "batch_norm backward")
                       .batch_norm_backward_input(in[0], in[1], mean, invstd, w, sum_dy, sum_dy_xmu, count,
                                                  relu ? in[2] : Tensor())};
  };
  c.reference = [relu, weight](const Refs& in, const OpArgs&) {
    const RefTensor& x = in[1];
    size_t next = relu ? 3 : 2;
    const RefTensor& mean = in[next++];
    const RefTensor& invstd = in[next++];
    const RefTensor* w = weight ? &in[next++] : nullptr;
    const RefTensor& sum_dy = in[next++];
    const RefTensor& sum_dy_xmu = in[next++];
    const double count = static_cast<double>(x.numel() / std::max<int64_t>(1, x.shape[1]));
    RefTensor dx{x.shape, in[0].dtype, std::vector<double>(x.values.size())};
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t ch = channel_of(x.shape, i);
      const double s = invstd.values[ch];
      const double centred = x.values[i] - mean.values[ch];
      const double g =
          masked_grad(in, relu, i) - sum_dy.values[ch] / count - centred * s * s * sum_dy_xmu.values[ch] / count;
      dx.values[i] = g * s * (w ? w->values[ch] : 1.0);
    }
    return Refs{dx};
  };
  return c;
}

// Autocast's batch norm backward through autograd: bf16 x and dy, float32 weight and bias; dx in
// bf16, the weight and bias gradients in float32 (training statistics, with or without the fused
// ReLU, whose mask is the rounded bf16 output's sign, the float64 output's too).
OpCase batch_norm_mixed_backward_case(const std::string& name, bool relu) {
  OpCase c;
  c.name = name;
  c.ops = {relu ? "batch_norm_relu" : "batch_norm", "requires_grad_", "backward"};
  c.dtypes = {kBFloat16};
  c.inputs = {InputSpec{{-2.0, 2.0}}, InputSpec{{-2.0, 2.0}}, InputSpec{{-1.5, 1.5}, kFloat32},
              InputSpec{{-1.0, 1.0}, kFloat32}};
  c.shapes = mixed_batch_norm_shapes(2, 2);
  c.allow_empty = false;
  c.tolerance_scale = 4;  // the float32 gradients sum N * S products
  c.run = [relu](const Tensors& in, const OpArgs&) {
    Tensor x = in[0].detach().requires_grad_(true);
    Tensor weight = in[2].detach().requires_grad_(true), bias = in[3].detach().requires_grad_(true);
    auto normalise = relu ? batch_norm_relu : batch_norm;
    normalise(x, Tensor(), Tensor(), weight, bias, true, kMomentum, kEps, nullptr).backward(in[1]);
    return Tensors{x.grad(), weight.grad(), bias.grad()};
  };
  c.reference = [relu](const Refs& in, const OpArgs&) {
    const RefTensor &x = in[0], &dy = in[1], &weight = in[2], &bias = in[3];
    auto [mean, var] = ref_moments(x);
    const RefTensor y = ref_normalise(x, mean, var, &weight, &bias, kEps, relu);
    const int64_t channels = x.shape[1];
    const double count = static_cast<double>(x.numel() / channels);
    std::vector<double> sum_g(channels, 0.0), sum_g_xhat(channels, 0.0), abs_g(channels, 0.0),
        abs_g_xhat(channels, 0.0);
    auto g_at = [&](int64_t i) { return relu && !(y.values[i] > 0) ? 0.0 : dy.values[i]; };
    auto xhat_at = [&](int64_t i) {
      const int64_t ch = channel_of(x.shape, i);
      return (x.values[i] - mean[ch]) / std::sqrt(var[ch] + kEps);
    };
    for (int64_t i = 0; i < x.numel(); ++i) {
      sum_g[channel_of(x.shape, i)] += g_at(i);
      sum_g_xhat[channel_of(x.shape, i)] += g_at(i) * xhat_at(i);
      abs_g[channel_of(x.shape, i)] += std::fabs(g_at(i));
      abs_g_xhat[channel_of(x.shape, i)] += std::fabs(g_at(i) * xhat_at(i));
    }
    // The float32 sums cancel: dx's rounding is relative to the sums' terms, not to its value.
    RefTensor dx{x.shape, kBFloat16, std::vector<double>(x.values.size()), std::vector<double>(x.values.size())};
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t ch = channel_of(x.shape, i);
      const double scale = weight.values[ch] / std::sqrt(var[ch] + kEps);
      dx.values[i] = (g_at(i) - sum_g[ch] / count - xhat_at(i) * sum_g_xhat[ch] / count) * scale;
      dx.magnitude[i] =
          (std::fabs(g_at(i)) + abs_g[ch] / count + std::fabs(xhat_at(i)) * abs_g_xhat[ch] / count) * std::fabs(scale);
    }
    return Refs{dx, ref_per_channel(sum_g_xhat, kFloat32), ref_per_channel(sum_g, kFloat32)};
  };
  return c;
}

// ---- softmax along one dim ----

// Calls fn(flat indices of one row) for every row of `shape` along `dim`.
void for_each_row(const Shape& shape, int64_t dim, const std::function<void(const std::vector<int64_t>&)>& fn) {
  if (shape.empty()) {
    fn({0});
    return;
  }
  int64_t stride = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < shape.size(); ++d) stride *= shape[d];
  const int64_t size = shape[dim], total = count_elements(shape);
  for (int64_t i = 0; i < total; ++i) {
    if ((i / stride) % size != 0) continue;
    std::vector<int64_t> row;
    for (int64_t k = 0; k < size; ++k) row.push_back(i + k * stride);
    fn(row);
  }
}

int64_t wrapped_dim(const Shape& shape, const OpArgs& args) {
  return wrap(args.dims[0], static_cast<int64_t>(shape.size()));
}

// exp(x - max) / sum, or x - max - log(sum); a row with no finite maximum (all -inf) is NaN.
RefTensor ref_softmax(const RefTensor& x, int64_t dim, bool log) {
  RefTensor y{x.shape, x.dtype, std::vector<double>(x.values.size())};
  for_each_row(x.shape, dim, [&](const std::vector<int64_t>& row) {
    double max = -kInfinity;
    for (int64_t i : row) max = std::max(max, x.values[i]);
    double sum = 0;
    for (int64_t i : row) sum += std::exp(x.values[i] - max);
    for (int64_t i : row) {
      if (std::isinf(max))
        y.values[i] = NAN;
      else
        y.values[i] = log ? x.values[i] - max - std::log(sum) : std::exp(x.values[i] - max) / sum;
    }
  });
  return y;
}

OpCase softmax_case(const std::string& name, bool log, ValueRange range, ShapeGenerator shapes,
                    double masked_below = -kInfinity) {
  OpCase c;
  c.name = name;
  c.ops = {log ? "log_softmax" : "softmax"};
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{range}};
  c.shapes = std::move(shapes);
  // Values below `masked_below` become -inf (attention masks); the reference sees the same.
  c.run = [log, masked_below](const Tensors& in, const OpArgs& a) {
    Tensor x = in[0];
    if (!std::isinf(masked_below)) {
      const TensorOptions options = TensorOptions(x.dtype()).device(x.device());
      x = where(x.lt(full({}, masked_below, options)), full({}, -kInfinity, options), x);
    }
    return Tensors{log ? log_softmax(x, a.dims[0]) : softmax(x, a.dims[0])};
  };
  c.reference = [log, masked_below](const Refs& in, const OpArgs& a) {
    RefTensor x = in[0];
    for (double& v : x.values)
      if (v < masked_below) v = -kInfinity;
    return Refs{ref_softmax(x, wrapped_dim(x.shape, a), log)};
  };
  // exp and log round in the compute dtype before the output's rounding.
  c.tolerance_scale = 2.0;
  return c;
}

// Inputs: dy, y (the forward's output). softmax: y (dy - sum(dy y)); log-softmax: dy - exp(y) sum(dy).
OpCase softmax_backward_case(const std::string& name, bool log, ShapeGenerator shapes) {
  OpCase c;
  c.name = name;
  c.kernel_table = true;
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-2.0, 2.0}}, log ? InputSpec{{-4.0, 0.0}} : InputSpec{{0.0, 1.0}}};
  c.shapes = std::move(shapes);
  c.run = [log](const Tensors& in, const OpArgs& a) {
    const int64_t dim = wrap(a.dims[0], in[0].dim());
    return Tensors{kernels_for(in[0].device(), "softmax backward").softmax_backward(in[0], in[1], dim, log)};
  };
  c.reference = [log](const Refs& in, const OpArgs& a) {
    const RefTensor &g = in[0], &y = in[1];
    RefTensor dx{g.shape, g.dtype, std::vector<double>(g.values.size())};
    for_each_row(g.shape, wrapped_dim(g.shape, a), [&](const std::vector<int64_t>& row) {
      double sum = 0;
      for (int64_t i : row) sum += log ? g.values[i] : g.values[i] * y.values[i];
      for (int64_t i : row)
        dx.values[i] = log ? g.values[i] - std::exp(y.values[i]) * sum : y.values[i] * (g.values[i] - sum);
    });
    return Refs{dx};
  };
  c.tolerance_scale = 2.0;
  return c;
}

// One dim longer than a warp takes (1024), with few rows: each row gets a block, contiguous or
// strided by the dims after it.
ShapeGenerator long_row_shapes(int inputs) {
  return [inputs](Rng& rng, OpArgs& args, bool) {
    static const std::vector<std::pair<Shape, int64_t>> forms = {
        {{1100}, 0}, {{2, 1500}, 1}, {{1300, 2}, 0}, {{2, 1030, 3}, 1}};
    const auto& [shape, dim] = rng.pick(forms);
    const int64_t rank = static_cast<int64_t>(shape.size());
    args.dims = {rng.chance(0.5) ? dim - rank : dim};
    return std::vector<Shape>(static_cast<size_t>(inputs), shape);
  };
}

}  // namespace

std::vector<OpCase> normalization_cases() {
  std::vector<OpCase> cases;
  const std::vector<BatchNormForm> forms = {
      {"batch_norm_train", true, false, true, true, true},
      {"batch_norm_relu_train", true, true, true, true, true},
      {"batch_norm_train_no_affine", true, false, false, false, false},
      {"batch_norm_relu_train_weight_only", true, true, true, false, false},
      {"batch_norm_train_bias_only", true, false, false, true, true},
      {"batch_norm_eval", false, false, true, true, true},
      {"batch_norm_relu_eval", false, true, true, true, true},
      {"batch_norm_eval_no_affine", false, false, false, false, true},
      {"batch_norm_16bit_float32_params_train", true, false, true, true, true, true},
      {"batch_norm_relu_16bit_float32_params_train", true, true, true, true, true, true},
      {"batch_norm_relu_16bit_float32_params_eval", false, true, true, true, true, true},
  };
  for (const BatchNormForm& f : forms) cases.push_back(batch_norm_case(f));
  cases.push_back(batch_norm_mixed_backward_case("batch_norm_bf16_float32_params_backward", false));
  cases.push_back(batch_norm_mixed_backward_case("batch_norm_relu_bf16_float32_params_backward", true));
  cases.push_back(batch_norm_stats_case("batch_norm_stats", {-2.0, 2.0}, batch_norm_shapes(1, 0, 0)));
  // Far from zero, where sum(x^2) - n mean^2 would cancel every digit in float32.
  cases.push_back(batch_norm_stats_case("batch_norm_stats_offset", {1000.0, 1002.0}, batch_norm_shapes(1, 0, 0)));
  cases.push_back(batch_norm_stats_case("batch_norm_stats_long_channels", {-2.0, 2.0}, long_channel_shapes(1, 0)));
  cases.push_back(batch_norm_backward_reduce_case("batch_norm_backward_reduce", false, batch_norm_shapes(2, 1, 0)));
  cases.push_back(batch_norm_backward_reduce_case("batch_norm_relu_backward_reduce", true, batch_norm_shapes(3, 1, 0)));
  cases.push_back(batch_norm_backward_reduce_case("batch_norm_relu_backward_reduce_long_channels", true,
                                                  long_channel_shapes(3, 1)));
  cases.push_back(batch_norm_backward_input_case("batch_norm_backward_input", false, true));
  cases.push_back(batch_norm_backward_input_case("batch_norm_relu_backward_input", true, true));
  cases.push_back(batch_norm_backward_input_case("batch_norm_backward_input_no_weight", false, false));
  for (bool log : {false, true}) {
    const std::string name = log ? "log_softmax" : "softmax";
    cases.push_back(softmax_case(name, log, {-4.0, 4.0}, one_dim_shapes(1)));
    // exp(1000) overflows every dtype: only the max-subtracted form stays finite.
    cases.push_back(softmax_case(name + "_large_values", log, {1000.0, 1010.0}, one_dim_shapes(1)));
    cases.push_back(softmax_case(name + "_wide_range", log, {-3000.0, 3000.0}, one_dim_shapes(1)));
    cases.push_back(softmax_case(name + "_masked", log, {-3.0, 2.0}, one_dim_shapes(1), -1.5));
    cases.push_back(softmax_case(name + "_long_rows", log, {-4.0, 4.0}, long_row_shapes(1)));
    cases.push_back(softmax_backward_case(name + "_backward", log, one_dim_shapes(2)));
    cases.push_back(softmax_backward_case(name + "_backward_long_rows", log, long_row_shapes(2)));
  }
  return cases;
}

}  // namespace ember::test
