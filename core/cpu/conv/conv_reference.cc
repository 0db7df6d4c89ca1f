// im2col convolution. Shapes: N batch, C input channels, O output channels, G groups,
// Cg = C / G, Og = O / G, K = Cg * KH * KW (one column), L = OH * OW (columns per sample).
#include "core/cpu/conv/conv_reference.h"

#include <tuple>
#include <vector>

#include "core/conv_params.h"
#include "core/cpu/gemm.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::cpu::reference {

namespace {

struct Geometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow, groups, cg, og;
  ConvParams p;
  int64_t k() const { return cg * kh * kw; }
  int64_t l() const { return oh * ow; }
};

Geometry geometry(const Shape& input, const Shape& weight, const ConvParams& p) {
  Geometry g;
  g.n = input[0];
  g.c = input[1];
  g.h = input[2];
  g.w = input[3];
  g.o = weight[0];
  g.kh = weight[2];
  g.kw = weight[3];
  g.groups = p.groups;
  g.cg = g.c / p.groups;
  g.og = g.o / p.groups;
  std::tie(g.oh, g.ow) = conv_output_hw(g.h, g.w, g.kh, g.kw, p);
  g.p = p;
  return g;
}

// Columns [K, L] of one group of one sample; zero where the window hangs over the padding.
template <typename T>
void im2col(const T* image, const Geometry& g, T* col) {
  for (int64_t ci = 0; ci < g.cg; ++ci)
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        T* row = col + ((ci * g.kh + ki) * g.kw + kj) * g.l();
        for (int64_t y = 0; y < g.oh; ++y) {
          int64_t iy = y * g.p.stride_h - g.p.pad_h + ki * g.p.dilation_h;
          for (int64_t x = 0; x < g.ow; ++x) {
            int64_t ix = x * g.p.stride_w - g.p.pad_w + kj * g.p.dilation_w;
            bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
            row[y * g.ow + x] = inside ? image[(ci * g.h + iy) * g.w + ix] : T(0);
          }
        }
      }
}

// The adjoint of im2col: adds every column entry back onto its pixel.
template <typename T>
void col2im(const T* col, const Geometry& g, T* image) {
  for (int64_t ci = 0; ci < g.cg; ++ci)
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const T* row = col + ((ci * g.kh + ki) * g.kw + kj) * g.l();
        for (int64_t y = 0; y < g.oh; ++y) {
          int64_t iy = y * g.p.stride_h - g.p.pad_h + ki * g.p.dilation_h;
          if (iy < 0 || iy >= g.h) continue;
          for (int64_t x = 0; x < g.ow; ++x) {
            int64_t ix = x * g.p.stride_w - g.p.pad_w + kj * g.p.dilation_w;
            if (ix >= 0 && ix < g.w) image[(ci * g.h + iy) * g.w + ix] += row[y * g.ow + x];
          }
        }
      }
}

template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
          T beta, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>)
    sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    gemm_reference<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Runs `body` on float32/float64 copies of 16-bit inputs, converting outputs back.
DType compute_dtype(DType d) { return d == kFloat64 ? kFloat64 : kFloat32; }

template <typename T>
void forward_typed(const Tensor& input, const Tensor& weight, const Tensor& bias, const Geometry& g, Tensor& out) {
  const T* x = input.data_ptr<T>();
  const T* wt = weight.data_ptr<T>();
  T* y = out.data_ptr<T>();
  std::vector<T> col(static_cast<size_t>(g.k() * g.l()));
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      im2col(x + (b * g.c + gi * g.cg) * g.h * g.w, g, col.data());
      gemm<T>(false, false, g.og, g.l(), g.k(), T(1), wt + gi * g.og * g.k(), g.k(), col.data(), g.l(), T(0),
              y + (b * g.o + gi * g.og) * g.l(), g.l());
    }
  if (bias.defined()) {
    const T* bv = bias.data_ptr<T>();
    for (int64_t b = 0; b < g.n; ++b)
      for (int64_t oc = 0; oc < g.o; ++oc) {
        T* plane = y + (b * g.o + oc) * g.l();
        for (int64_t i = 0; i < g.l(); ++i) plane[i] += bv[oc];
      }
  }
}

template <typename T>
void backward_input_typed(const Tensor& grad_output, const Tensor& weight, const Geometry& g, Tensor& grad_input) {
  const T* dy = grad_output.data_ptr<T>();
  const T* wt = weight.data_ptr<T>();
  T* dx = grad_input.data_ptr<T>();
  std::vector<T> col(static_cast<size_t>(g.k() * g.l()));
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      gemm<T>(true, false, g.k(), g.l(), g.og, T(1), wt + gi * g.og * g.k(), g.k(), dy + (b * g.o + gi * g.og) * g.l(),
              g.l(), T(0), col.data(), g.l());
      col2im(col.data(), g, dx + (b * g.c + gi * g.cg) * g.h * g.w);
    }
}

template <typename T>
void backward_weight_typed(const Tensor& grad_output, const Tensor& input, const Geometry& g, Tensor& grad_weight,
                           Tensor* grad_bias) {
  const T* dy = grad_output.data_ptr<T>();
  const T* x = input.data_ptr<T>();
  T* dw = grad_weight.data_ptr<T>();
  std::vector<T> col(static_cast<size_t>(g.k() * g.l()));
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      im2col(x + (b * g.c + gi * g.cg) * g.h * g.w, g, col.data());
      gemm<T>(false, true, g.og, g.k(), g.l(), T(1), dy + (b * g.o + gi * g.og) * g.l(), g.l(), col.data(), g.l(), T(1),
              dw + gi * g.og * g.k(), g.k());
    }
  if (grad_bias) {
    T* db = grad_bias->data_ptr<T>();
    for (int64_t oc = 0; oc < g.o; ++oc) {
      double total = 0;
      for (int64_t b = 0; b < g.n; ++b)
        for (int64_t i = 0; i < g.l(); ++i) total += dy[(b * g.o + oc) * g.l() + i];
      db[oc] = static_cast<T>(total);
    }
  }
}

}  // namespace

Tensor conv2d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, const ConvParams& p) {
  NoGradGuard no_grad;
  DType ct = compute_dtype(input_in.dtype());
  Tensor input = input_in.to(ct).contiguous(), weight = weight_in.to(ct).contiguous();
  Tensor bias = bias_in.defined() ? bias_in.to(ct).contiguous() : Tensor();
  Geometry g = geometry(input.sizes(), weight.sizes(), p);
  Tensor out = empty({g.n, g.o, g.oh, g.ow}, input.options());
  if (ct == kFloat64)
    forward_typed<double>(input, weight, bias, g, out);
  else
    forward_typed<float>(input, weight, bias, g, out);
  return out.to(input_in.dtype());
}

Tensor conv2d_backward_input(const Tensor& grad_output_in, const Tensor& weight_in, const Shape& input_shape,
                             const ConvParams& p) {
  NoGradGuard no_grad;
  DType ct = compute_dtype(grad_output_in.dtype());
  Tensor grad_output = grad_output_in.to(ct).contiguous(), weight = weight_in.to(ct).contiguous();
  Geometry g = geometry(input_shape, weight.sizes(), p);
  Tensor grad_input = zeros(input_shape, grad_output.options());
  if (ct == kFloat64)
    backward_input_typed<double>(grad_output, weight, g, grad_input);
  else
    backward_input_typed<float>(grad_output, weight, g, grad_input);
  return grad_input.to(grad_output_in.dtype());
}

std::pair<Tensor, Tensor> conv2d_backward_weight(const Tensor& grad_output_in, const Tensor& input_in,
                                                 const Shape& weight_shape, bool want_bias, const ConvParams& p) {
  NoGradGuard no_grad;
  DType ct = compute_dtype(grad_output_in.dtype());
  Tensor grad_output = grad_output_in.to(ct).contiguous(), input = input_in.to(ct).contiguous();
  Geometry g = geometry(input.sizes(), weight_shape, p);
  Tensor grad_weight = zeros(weight_shape, grad_output.options());
  Tensor grad_bias = want_bias ? empty({g.o}, grad_output.options()) : Tensor();
  if (ct == kFloat64)
    backward_weight_typed<double>(grad_output, input, g, grad_weight, want_bias ? &grad_bias : nullptr);
  else
    backward_weight_typed<float>(grad_output, input, g, grad_weight, want_bias ? &grad_bias : nullptr);
  DType out_dtype = grad_output_in.dtype();
  return {grad_weight.to(out_dtype), want_bias ? grad_bias.to(out_dtype) : Tensor()};
}

}  // namespace ember::cpu::reference
