// CPU batch norm over dim 1 of [N, C, *]: statistics, the affine apply, and the two halves of
// the backward (per-channel reductions, then the elementwise input gradient), each optionally with
// the ReLU that follows fused in. Works on dense data with channels outermost ([N, C, S]) or
// innermost ([N*S, C], channels-last) without a layout copy. bf16 activations go to the vector
// passes of batch_norm_bf16.cc where the CPU has them; the loops here, in float32 (or float64)
// over a converted copy, are their reference.
#include <cmath>
#include <vector>

#include "core/batch_norm_math.h"
#include "core/cpu/batch_norm_layout.h"
#include "core/cpu/kernels.h"
#include "core/cpu/thread_pool.h"
#include "core/elementwise_math.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::cpu {

namespace batch_norm {

namespace {

bool is_channels_last(const Tensor& t) {
  if (t.dim() < 3 || t.stride(1) != 1) return false;
  return is_dense(t);
}

}  // namespace

Tensor normalise_layout(const Tensor& t, const Tensor* like, Layout* layout) {
  Tensor out = t;
  bool want_cl = like ? is_channels_last(*like) : is_channels_last(t);
  if (want_cl) {
    if (!(is_channels_last(t) && (!like || t.strides() == like->strides()))) {
      out = like ? empty_like(*like) : empty_strided(t.sizes(), contiguous_strides(t.sizes()), t.options());
      copy_into(out, t);
    }
  } else if (!t.is_contiguous()) {
    out = t.contiguous();
  }
  layout->channels_last = want_cl;
  layout->n = t.size(0);
  layout->c = t.size(1);
  layout->s = t.numel() / std::max<int64_t>(1, layout->n * layout->c);
  return out;
}

}  // namespace batch_norm

namespace {

using batch_norm::channels_last_sums;
using batch_norm::Layout;
using batch_norm::normalise_layout;

DType compute_dtype(DType d) { return d == kFloat64 ? kFloat64 : kFloat32; }

// Calls visit(channel, pointer to a contiguous run, run length, run stride in elements) for
// every run of one channel; channels-last runs have stride C.
template <typename T, typename Visit>
void for_channel_runs(const Layout& l, T* data, int64_t channel, Visit visit) {
  if (l.channels_last) {
    visit(data + channel, l.n * l.s, l.c);
  } else {
    for (int64_t b = 0; b < l.n; ++b) visit(data + (b * l.c + channel) * l.s, l.s, 1);
  }
}

// The inner loops, one contiguous run each, written with restrict pointers and local bounds so the
// compiler vectorises them (through captured references it could not prove the bounds invariant).
// The per-element formulas are core/batch_norm_math.h's, shared with the CUDA kernels.

// dy as the backward sees it: with the fused ReLU, zero where the forward's output was not > 0.
template <typename T, bool kMask>
inline T masked(T dy, T y) {
  if constexpr (kMask) return formula::keep_where_positive(dy, y);
  return dy;
}

template <typename T>
void stats_row(const T* __restrict x, const T* __restrict shift, double* __restrict sum, double* __restrict sum_sq,
               int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    const double d = static_cast<double>(x[c] - shift[c]);
    sum[c] += d;
    sum_sq[c] += d * d;
  }
}

template <typename T, bool kRelu>
void affine_row(const T* __restrict x, T* __restrict out, const T* __restrict scale, const T* __restrict shift,
                int64_t n) {
  for (int64_t c = 0; c < n; ++c) out[c] = formula::batch_norm_output(x[c], scale[c], shift[c], kRelu);
}

template <typename T, bool kMask>
void grad_sums_row(const T* __restrict dy, const T* __restrict y, const T* __restrict x, const T* __restrict mean,
                   double* __restrict sum_dy, double* __restrict sum_dy_xmu, int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    const T g = masked<T, kMask>(dy[c], kMask ? y[c] : T(0));
    const T centred = x[c] - mean[c];
    sum_dy[c] += static_cast<double>(g);
    sum_dy_xmu[c] += static_cast<double>(g) * static_cast<double>(centred);
  }
}

template <typename T, bool kMask>
void input_grad_row(const T* __restrict dy, const T* __restrict y, const T* __restrict x, T* __restrict out,
                    const T* __restrict k, const T* __restrict a, const T* __restrict b, int64_t n) {
  for (int64_t c = 0; c < n; ++c)
    out[c] =
        formula::batch_norm_input_grad_element(masked<T, kMask>(dy[c], kMask ? y[c] : T(0)), x[c], k[c], a[c], b[c]);
}

template <typename T>
std::pair<Tensor, Tensor> stats_typed(const Tensor& x, const Layout& l) {
  Tensor mean = empty({l.c}, x.options()), var = empty({l.c}, x.options());
  T* m = mean.data_ptr<T>();
  T* v = var.data_ptr<T>();
  const T* data = x.data_ptr<T>();
  const int64_t count = l.n * l.s;
  // Shifted sums (by the channel's first value) keep E[x^2] - E[x]^2 free of cancellation.
  std::vector<T> shift(l.c, T(0));
  if (count > 0)
    for (int64_t c = 0; c < l.c; ++c) shift[c] = data[l.channels_last ? c : c * l.s];
  auto finish = [&](int64_t c, double sum, double sum_sq) {
    const double mu = count > 0 ? sum / count : 0.0;
    m[c] = static_cast<T>(mu + shift[c]);
    // Clamped at 0 against rounding, but NaN (from a NaN or an infinity) passes, as Welford's does.
    const double variance = sum_sq / count - mu * mu;
    v[c] = static_cast<T>(count > 0 ? (variance < 0.0 ? 0.0 : variance) : NAN);
  };
  if (l.channels_last) {
    const T* shifts = shift.data();
    std::vector<double> sums = channels_last_sums<2>(count, l.c, [&](int64_t r0, int64_t r1, double* acc) {
      for (int64_t r = r0; r < r1; ++r) stats_row(data + r * l.c, shifts, acc, acc + l.c, l.c);
    });
    for (int64_t c = 0; c < l.c; ++c) finish(c, sums[c], sums[l.c + c]);
    return {mean, var};
  }
  parallel_for(0, l.c, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      double sum = 0, sum_sq = 0;
      for_channel_runs(l, data, c, [&](const T* run, int64_t len, int64_t stride) {
        for (int64_t i = 0; i < len; ++i) {
          double d = static_cast<double>(run[i * stride] - shift[c]);
          sum += d;
          sum_sq += d * d;
        }
      });
      finish(c, sum, sum_sq);
    }
  });
  return {mean, var};
}

template <typename T, bool kRelu>
Tensor apply_typed(const Tensor& x, const Layout& l, const T* mean, const T* invstd, const T* weight, const T* bias) {
  Tensor y = empty_like(x);
  std::vector<T> scale(l.c), shift(l.c);
  for (int64_t c = 0; c < l.c; ++c) {
    const formula::BatchNormAffine<T> affine =
        formula::batch_norm_affine(mean[c], invstd[c], weight ? weight[c] : T(1), bias ? bias[c] : T(0));
    scale[c] = affine.scale;
    shift[c] = affine.shift;
  }
  const T* in = x.data_ptr<T>();
  T* out = y.data_ptr<T>();
  if (l.channels_last) {
    const int64_t channels = l.c;
    parallel_for(0, l.n * l.s, std::max<int64_t>(1, 16384 / channels), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r)
        affine_row<T, kRelu>(in + r * channels, out + r * channels, scale.data(), shift.data(), channels);
    });
  } else {
    const int64_t channels = l.c, plane_size = l.s;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, plane_size));  // planes may be empty
    parallel_for(0, l.n * channels, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t plane = lo; plane < hi; ++plane) {
        const T a = scale[plane % channels], b = shift[plane % channels];
        const T* __restrict x = in + plane * plane_size;
        T* __restrict o = out + plane * plane_size;
        for (int64_t i = 0; i < plane_size; ++i) o[i] = formula::batch_norm_output(x[i], a, b, kRelu);
      }
    });
  }
  return y;
}

template <typename T, bool kMask>
std::pair<Tensor, Tensor> backward_reduce_typed(const Tensor& dy, const Tensor& x, const Layout& l, const T* mean,
                                                const T* y) {
  Tensor sum_dy = empty({l.c}, x.options()), sum_dy_xmu = empty({l.c}, x.options());
  T* a = sum_dy.data_ptr<T>();
  T* b = sum_dy_xmu.data_ptr<T>();
  const T* g = dy.data_ptr<T>();
  const T* in = x.data_ptr<T>();
  if (l.channels_last) {
    std::vector<double> sums = channels_last_sums<2>(l.n * l.s, l.c, [&](int64_t r0, int64_t r1, double* acc) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t at = r * l.c;
        grad_sums_row<T, kMask>(g + at, kMask ? y + at : nullptr, in + at, mean, acc, acc + l.c, l.c);
      }
    });
    for (int64_t c = 0; c < l.c; ++c) {
      a[c] = static_cast<T>(sums[c]);
      b[c] = static_cast<T>(sums[l.c + c]);
    }
    return {sum_dy, sum_dy_xmu};
  }
  parallel_for(0, l.c, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t c = lo; c < hi; ++c) {
      double s1 = 0, s2 = 0;
      const T mu = mean[c];
      // dy and x share a layout, so the same offsets address both.
      for_channel_runs(l, in, c, [&](const T* run, int64_t len, int64_t stride) {
        const T* grun = g + (run - in);
        const T* yrun = kMask ? y + (run - in) : nullptr;
        for (int64_t i = 0; i < len; ++i) {
          double gi = static_cast<double>(masked<T, kMask>(grun[i * stride], kMask ? yrun[i * stride] : T(0)));
          s1 += gi;
          s2 += gi * static_cast<double>(run[i * stride] - mu);
        }
      });
      a[c] = static_cast<T>(s1);
      b[c] = static_cast<T>(s2);
    }
  });
  return {sum_dy, sum_dy_xmu};
}

template <typename T, bool kMask>
Tensor backward_input_typed(const Tensor& dy, const Tensor& x, const Layout& l, const T* mean, const T* invstd,
                            const T* weight, const T* sum_dy, const T* sum_dy_xmu, int64_t count, const T* y) {
  Tensor dx = empty_like(x);
  // dx = dy * k - x * a - b per channel (formula::batch_norm_input_grad).
  std::vector<T> k(l.c), a(l.c), b(l.c);
  for (int64_t c = 0; c < l.c; ++c) {
    const formula::BatchNormInputGrad<T> coefficients = formula::batch_norm_input_grad<T>(
        mean[c], invstd[c], weight ? weight[c] : 1.0, sum_dy[c], sum_dy_xmu[c], count);
    k[c] = coefficients.k;
    a[c] = coefficients.a;
    b[c] = coefficients.b;
  }
  const T* g = dy.data_ptr<T>();
  const T* in = x.data_ptr<T>();
  T* out = dx.data_ptr<T>();
  if (l.channels_last) {
    const int64_t channels = l.c;
    parallel_for(0, l.n * l.s, std::max<int64_t>(1, 16384 / channels), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const int64_t at = r * channels;
        input_grad_row<T, kMask>(g + at, kMask ? y + at : nullptr, in + at, out + at, k.data(), a.data(), b.data(),
                                 channels);
      }
    });
  } else {
    const int64_t channels = l.c, plane_size = l.s;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, plane_size));  // planes may be empty
    parallel_for(0, l.n * channels, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t plane = lo; plane < hi; ++plane) {
        const int64_t c = plane % channels, at = plane * plane_size;
        const T kc = k[c], ac = a[c], bc = b[c];
        const T* __restrict gp = g + at;
        const T* __restrict yp = kMask ? y + at : nullptr;
        const T* __restrict xp = in + at;
        T* __restrict o = out + at;
        for (int64_t i = 0; i < plane_size; ++i)
          o[i] =
              formula::batch_norm_input_grad_element(masked<T, kMask>(gp[i], kMask ? yp[i] : T(0)), xp[i], kc, ac, bc);
      }
    });
  }
  return dx;
}

Tensor as_compute(const Tensor& t, DType ct) { return t.defined() ? t.to(ct).contiguous() : Tensor(); }

template <typename T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Calls body(T{}) with T the compute type (double or float).
template <typename Body>
void with_compute_type(DType ct, const Body& body) {
  if (ct == kFloat64)
    body(double{});
  else
    body(float{});
}

}  // namespace

std::pair<Tensor, Tensor> batch_norm_stats_kernel(const Tensor& input) {
  NoGradGuard no_grad;
  if (batch_norm::bf16_takes({&input})) return batch_norm::bf16_stats(input);
  DType ct = compute_dtype(input.dtype());
  Layout l;
  Tensor x = normalise_layout(input.to(ct), nullptr, &l);
  return ct == kFloat64 ? stats_typed<double>(x, l) : stats_typed<float>(x, l);
}

Tensor batch_norm_apply_kernel(const Tensor& input, const Tensor& mean_in, const Tensor& invstd_in,
                               const Tensor& weight_in, const Tensor& bias_in, bool relu) {
  NoGradGuard no_grad;
  if (batch_norm::bf16_takes({&input}))
    return batch_norm::bf16_apply(input, mean_in, invstd_in, weight_in, bias_in, relu);
  DType ct = compute_dtype(input.dtype());
  Layout l;
  Tensor x = normalise_layout(input.to(ct), nullptr, &l);
  Tensor mean = as_compute(mean_in, ct), invstd = as_compute(invstd_in, ct);
  Tensor weight = as_compute(weight_in, ct), bias = as_compute(bias_in, ct);
  Tensor y;
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    auto apply = relu ? apply_typed<T, true> : apply_typed<T, false>;
    y = apply(x, l, mean.data_ptr<T>(), invstd.data_ptr<T>(), ptr_or_null<T>(weight), ptr_or_null<T>(bias));
  });
  return y.to(input.dtype());
}

std::pair<Tensor, Tensor> batch_norm_backward_reduce_kernel(const Tensor& grad_output, const Tensor& input,
                                                            const Tensor& mean_in, const Tensor& relu_output) {
  NoGradGuard no_grad;
  if (batch_norm::bf16_takes({&grad_output, &input, &relu_output}))
    return batch_norm::bf16_backward_reduce(grad_output, input, mean_in, relu_output);
  DType ct = compute_dtype(input.dtype());
  Layout l, other;
  Tensor x = normalise_layout(input.to(ct), nullptr, &l);
  Tensor dy = normalise_layout(grad_output.to(ct), &x, &other);
  Tensor y = relu_output.defined() ? normalise_layout(relu_output.to(ct), &x, &other) : Tensor();
  Tensor mean = as_compute(mean_in, ct);
  std::pair<Tensor, Tensor> sums;
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    auto reduce = y.defined() ? backward_reduce_typed<T, true> : backward_reduce_typed<T, false>;
    sums = reduce(dy, x, l, mean.data_ptr<T>(), ptr_or_null<T>(y));
  });
  return sums;
}

Tensor batch_norm_backward_input_kernel(const Tensor& grad_output, const Tensor& input, const Tensor& mean_in,
                                        const Tensor& invstd_in, const Tensor& weight_in, const Tensor& sum_dy_in,
                                        const Tensor& sum_dy_xmu_in, int64_t count, const Tensor& relu_output) {
  NoGradGuard no_grad;
  if (batch_norm::bf16_takes({&grad_output, &input, &relu_output}))
    return batch_norm::bf16_backward_input(grad_output, input, mean_in, invstd_in, weight_in, sum_dy_in, sum_dy_xmu_in,
                                           count, relu_output);
  DType ct = compute_dtype(input.dtype());
  Layout l, other;
  Tensor x = normalise_layout(input.to(ct), nullptr, &l);
  Tensor dy = normalise_layout(grad_output.to(ct), &x, &other);
  Tensor y = relu_output.defined() ? normalise_layout(relu_output.to(ct), &x, &other) : Tensor();
  Tensor mean = as_compute(mean_in, ct), invstd = as_compute(invstd_in, ct), weight = as_compute(weight_in, ct);
  Tensor sum_dy = as_compute(sum_dy_in, ct), sum_dy_xmu = as_compute(sum_dy_xmu_in, ct);
  Tensor dx;
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    auto input_grad = y.defined() ? backward_input_typed<T, true> : backward_input_typed<T, false>;
    dx = input_grad(dy, x, l, mean.data_ptr<T>(), invstd.data_ptr<T>(), ptr_or_null<T>(weight), sum_dy.data_ptr<T>(),
                    sum_dy_xmu.data_ptr<T>(), count, ptr_or_null<T>(y));
  });
  return dx.to(grad_output.dtype());
}

}  // namespace ember::cpu
