// Batch norm over bf16 activations with float32 statistics, weight, bias and sums (autocast's
// batch norm), on the vector loops of core/cpu/simd: each pass reads the bf16 tensors once and
// writes its result once, where converting them to float32 first (the reference path in
// batch_norm_kernels.cc) would read and write every activation twice more. Channels-last blocks
// split by rows between threads, NCHW by planes, as the float32 passes do.
#include <cmath>
#include <vector>

#include "core/batch_norm_math.h"
#include "core/cpu/batch_norm_layout.h"
#include "core/cpu/simd/kernels.h"
#include "core/cpu/thread_pool.h"
#include "core/factory.h"
#include "core/ops.h"

namespace ember::cpu::batch_norm {

namespace {

// Work per parallel_for chunk of the elementwise passes, in elements.
constexpr int64_t kGrain = 16384;

const BFloat16* bf16_data(const Tensor& t) {
  return t.defined() ? static_cast<const BFloat16*>(t.data_ptr()) : nullptr;
}

BFloat16* bf16_data(Tensor& t) { return static_cast<BFloat16*>(t.data_ptr()); }

// A per-channel tensor as floats (1 or 0 where undefined).
std::vector<float> per_channel(const Tensor& t, int64_t channels, float absent) {
  if (!t.defined()) return std::vector<float>(channels, absent);
  Tensor f = t.to(kFloat32).contiguous();
  const float* data = f.data_ptr<float>();
  return std::vector<float>(data, data + channels);
}

Tensor float_tensor(const std::vector<double>& values, int64_t offset, int64_t channels) {
  Tensor out = empty({channels}, TensorOptions(kFloat32));
  float* data = out.data_ptr<float>();
  for (int64_t c = 0; c < channels; ++c) data[c] = static_cast<float>(values[offset + c]);
  return out;
}

// Runs per-channel sums of two terms over `l`: `rows(r0, r1, acc)` on a thread's channels-last
// rows into acc[0, 2C), or `plane(channel, offset, acc)` on each (n, c) plane into acc[0, 2)
// (planes of a channel summed on one thread, in order).
template <typename Rows, typename Plane>
std::vector<double> two_sums(const Layout& l, const Rows& rows, const Plane& plane) {
  if (l.channels_last) return channels_last_sums<2>(l.n * l.s, l.c, rows);
  std::vector<double> sums(2 * l.c, 0.0);
  parallel_for(0, l.c, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      double acc[2] = {0.0, 0.0};
      for (int64_t b = 0; b < l.n; ++b) plane(c, (b * l.c + c) * l.s, acc);
      sums[c] = acc[0];
      sums[l.c + c] = acc[1];
    }
  });
  return sums;
}

// Runs an elementwise pass over `l`: `rows(first_row, count)` on channels-last rows, or
// `plane(channel, offset)` on each (n, c) plane.
template <typename Rows, typename Plane>
void elementwise(const Layout& l, const Rows& rows, const Plane& plane) {
  if (l.channels_last) {
    parallel_for(0, l.n * l.s, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, l.c)),
                 [&](int64_t lo, int64_t hi) { rows(lo, hi - lo); });
    return;
  }
  parallel_for(0, l.n * l.c, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, l.s)), [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) plane(p % l.c, p * l.s);
  });
}

}  // namespace

bool bf16_takes(std::initializer_list<const Tensor*> activations) {
  for (const Tensor* t : activations)
    if (t->defined() && t->dtype() != kBFloat16) return false;
  return simd::available();
}

std::pair<Tensor, Tensor> bf16_stats(const Tensor& input) {
  Layout l;
  const Tensor x = normalise_layout(input, nullptr, &l);
  const BFloat16* data = bf16_data(x);
  const int64_t count = l.n * l.s;
  // Shifted sums (by the channel's first value) keep E[x^2] - E[x]^2 free of cancellation.
  std::vector<float> shift(l.c, 0.0f);
  if (count > 0)
    for (int64_t c = 0; c < l.c; ++c) shift[c] = static_cast<float>(data[l.channels_last ? c : c * l.s]);
  const simd::BatchNormLoops& loops = simd::batch_norm_loops();
  const std::vector<double> sums = two_sums(
      l,
      [&](int64_t r0, int64_t r1, double* acc) {
        std::vector<float> scratch(2 * l.c);
        loops.stats_rows(data + r0 * l.c, r1 - r0, l.c, shift.data(), scratch.data(), acc, acc + l.c);
      },
      [&](int64_t c, int64_t offset, double* acc) { loops.stats_plane(data + offset, l.s, shift[c], acc, acc + 1); });
  Tensor mean = empty({l.c}, TensorOptions(kFloat32)), var = empty({l.c}, TensorOptions(kFloat32));
  float* m = mean.data_ptr<float>();
  float* v = var.data_ptr<float>();
  for (int64_t c = 0; c < l.c; ++c) {
    const double mu = count > 0 ? sums[c] / count : 0.0;
    m[c] = static_cast<float>(mu + shift[c]);
    // Clamped at 0 against rounding, but NaN (from a NaN or an infinity) passes, as Welford's does.
    const double variance = sums[l.c + c] / count - mu * mu;
    v[c] = static_cast<float>(count > 0 ? (variance < 0.0 ? 0.0 : variance) : NAN);
  }
  return {mean, var};
}

Tensor bf16_apply(const Tensor& input, const Tensor& mean_in, const Tensor& invstd_in, const Tensor& weight_in,
                  const Tensor& bias_in, bool relu) {
  Layout l;
  const Tensor x = normalise_layout(input, nullptr, &l);
  Tensor y = empty_like(x);
  const std::vector<float> mean = per_channel(mean_in, l.c, 0), invstd = per_channel(invstd_in, l.c, 1);
  const std::vector<float> weight = per_channel(weight_in, l.c, 1), bias = per_channel(bias_in, l.c, 0);
  std::vector<float> scale(l.c), shift(l.c);
  for (int64_t c = 0; c < l.c; ++c) {
    const formula::BatchNormAffine<float> affine = formula::batch_norm_affine(mean[c], invstd[c], weight[c], bias[c]);
    scale[c] = affine.scale;
    shift[c] = affine.shift;
  }
  const simd::BatchNormLoops& loops = simd::batch_norm_loops();
  const BFloat16* in = bf16_data(x);
  BFloat16* out = bf16_data(y);
  elementwise(
      l,
      [&](int64_t r, int64_t rows) {
        loops.apply_rows[relu](in + r * l.c, out + r * l.c, rows, l.c, scale.data(), shift.data());
      },
      [&](int64_t c, int64_t at) { loops.apply_plane[relu](in + at, out + at, l.s, scale[c], shift[c]); });
  return y;
}

std::pair<Tensor, Tensor> bf16_backward_reduce(const Tensor& grad_output, const Tensor& input, const Tensor& mean_in,
                                               const Tensor& relu_output) {
  Layout l, other;
  const Tensor x = normalise_layout(input, nullptr, &l);
  const Tensor dy = normalise_layout(grad_output, &x, &other);
  const Tensor y = relu_output.defined() ? normalise_layout(relu_output, &x, &other) : Tensor();
  const bool mask = y.defined();
  const std::vector<float> mean = per_channel(mean_in, l.c, 0);
  const simd::BatchNormLoops& loops = simd::batch_norm_loops();
  const BFloat16 *g = bf16_data(dy), *in = bf16_data(x), *out = bf16_data(y);
  const std::vector<double> sums = two_sums(
      l,
      [&](int64_t r0, int64_t r1, double* acc) {
        std::vector<float> scratch(2 * l.c);
        const int64_t at = r0 * l.c;
        loops.grad_sums_rows[mask](g + at, mask ? out + at : nullptr, in + at, r1 - r0, l.c, mean.data(),
                                   scratch.data(), acc, acc + l.c);
      },
      [&](int64_t c, int64_t at, double* acc) {
        loops.grad_sums_plane[mask](g + at, mask ? out + at : nullptr, in + at, l.s, mean[c], acc, acc + 1);
      });
  return {float_tensor(sums, 0, l.c), float_tensor(sums, l.c, l.c)};
}

Tensor bf16_backward_input(const Tensor& grad_output, const Tensor& input, const Tensor& mean_in,
                           const Tensor& invstd_in, const Tensor& weight_in, const Tensor& sum_dy_in,
                           const Tensor& sum_dy_xmu_in, int64_t count, const Tensor& relu_output) {
  Layout l, other;
  const Tensor x = normalise_layout(input, nullptr, &l);
  const Tensor dy = normalise_layout(grad_output, &x, &other);
  const Tensor y = relu_output.defined() ? normalise_layout(relu_output, &x, &other) : Tensor();
  const bool mask = y.defined();
  Tensor dx = empty_like(x);
  const std::vector<float> mean = per_channel(mean_in, l.c, 0), invstd = per_channel(invstd_in, l.c, 1);
  const std::vector<float> weight = per_channel(weight_in, l.c, 1);
  const std::vector<float> sum_dy = per_channel(sum_dy_in, l.c, 0), sum_dy_xmu = per_channel(sum_dy_xmu_in, l.c, 0);
  // dx = dy * k - x * a - b per channel (formula::batch_norm_input_grad).
  std::vector<float> k(l.c), a(l.c), b(l.c);
  for (int64_t c = 0; c < l.c; ++c) {
    const formula::BatchNormInputGrad<float> coefficients =
        formula::batch_norm_input_grad<float>(mean[c], invstd[c], weight[c], sum_dy[c], sum_dy_xmu[c], count);
    k[c] = coefficients.k;
    a[c] = coefficients.a;
    b[c] = coefficients.b;
  }
  const simd::BatchNormLoops& loops = simd::batch_norm_loops();
  const BFloat16 *g = bf16_data(dy), *in = bf16_data(x), *out = bf16_data(y);
  BFloat16* result = bf16_data(dx);
  elementwise(
      l,
      [&](int64_t r, int64_t rows) {
        const int64_t at = r * l.c;
        loops.input_grad_rows[mask](g + at, mask ? out + at : nullptr, in + at, result + at, rows, l.c, k.data(),
                                    a.data(), b.data());
      },
      [&](int64_t c, int64_t at) {
        loops.input_grad_plane[mask](g + at, mask ? out + at : nullptr, in + at, result + at, l.s, k[c], a[c], b[c]);
      });
  return dx;
}

}  // namespace ember::cpu::batch_norm
