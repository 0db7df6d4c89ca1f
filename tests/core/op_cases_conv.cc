// Convolution cases: conv2d forward (with and without bias) and its two backward kernels, reached
// through autograd with a given output gradient, on random geometry: stride, padding, dilation,
// groups (depthwise included), odd sizes, and the harness's non-contiguous layouts (channels-last
// among them), and sums long enough to tell float32 accumulation of 16-bit data from 16-bit
// accumulation. The float64 references are the definition, summed by hand.
#include <algorithm>

#include "autograd/functional.h"
#include "tests/core/op_cases.h"

namespace ember::test {

namespace {

using Tensors = std::vector<Tensor>;
using Refs = std::vector<RefTensor>;

// params: stride h, w; padding h, w; dilation h, w; groups.
struct Geometry {
  int64_t sh, sw, ph, pw, dh, dw, groups;
  int64_t n, c, h, w, o, kh, kw, oh, ow;
};

Geometry geometry(const Shape& input, const Shape& weight, const OpArgs& a) {
  const auto& p = a.params;
  Geometry g{p[0],     p[1],     p[2],     p[3],      p[4],      p[5],      p[6], input[0],
             input[1], input[2], input[3], weight[0], weight[2], weight[3], 0,    0};
  g.oh = (g.h + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  return g;
}

// Input [N, C, H, W], weight [O, C / groups, KH, KW], then optionally bias [O] and an output
// gradient [N, O, OH, OW].
ShapeGenerator conv_shapes(bool with_bias, bool with_grad) {
  return [=](Rng& rng, OpArgs& a, bool) {
    const int64_t groups = rng.pick<int64_t>({1, 1, 2, 3});
    const int64_t group_in = rng.integer(1, 3), group_out = rng.integer(1, 3);
    const int64_t kh = rng.integer(1, 3), kw = rng.integer(1, 3);
    const int64_t dh = rng.integer(1, 2), dw = rng.integer(1, 2);
    const int64_t ph = rng.integer(0, 2), pw = rng.integer(0, 2);
    const int64_t sh = rng.integer(1, 3), sw = rng.integer(1, 3);
    // The padded input must hold the dilated kernel.
    const int64_t h = std::max(rng.integer(1, 9), dh * (kh - 1) + 1 - 2 * ph);
    const int64_t w = std::max(rng.integer(1, 9), dw * (kw - 1) + 1 - 2 * pw);
    const int64_t n = rng.integer(1, 3);
    a.params = {sh, sw, ph, pw, dh, dw, groups};
    std::vector<Shape> shapes = {{n, groups * group_in, h, w}, {groups * group_out, group_in, kh, kw}};
    if (with_bias) shapes.push_back({groups * group_out});
    if (with_grad) {
      const Geometry g = geometry(shapes[0], shapes[1], a);
      shapes.push_back({n, g.o, g.oh, g.ow});
    }
    return shapes;
  };
}

Tensor run_conv(const Tensor& x, const Tensor& w, const Tensor& b, const OpArgs& a) {
  const auto& p = a.params;
  return conv2d(x, w, b, Size2(p[0], p[1]), Size2(p[2], p[3]), Size2(p[4], p[5]), p[6]);
}

// Calls fn(n, o, oy, ox, c, ky, kx, y, x) for every tap that reads inside the input.
template <class Fn>
void for_each_tap(const Geometry& g, Fn fn) {
  const int64_t group_in = g.c / g.groups, group_out = g.o / g.groups;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t o = 0; o < g.o; ++o)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox)
          for (int64_t ci = 0; ci < group_in; ++ci)
            for (int64_t ky = 0; ky < g.kh; ++ky)
              for (int64_t kx = 0; kx < g.kw; ++kx) {
                const int64_t y = oy * g.sh - g.ph + ky * g.dh, x = ox * g.sw - g.pw + kx * g.dw;
                if (y < 0 || y >= g.h || x < 0 || x >= g.w) continue;
                fn(n, o, oy, ox, (o / group_out) * group_in + ci, ci, ky, kx, y, x);
              }
}

OpCase forward_case(bool with_bias) {
  OpCase c;
  c.name = with_bias ? "conv2d_bias" : "conv2d";
  c.ops = {"conv2d"};
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-1.0, 1.0}}};
  c.shapes = conv_shapes(with_bias, false);
  c.allow_empty = false;
  c.sum_terms = [=](const std::vector<Shape>& s, const OpArgs&) { return s[1][1] * s[1][2] * s[1][3] + with_bias; };
  // The bias may be added to the rounded convolution (cuDNN's path, as in PyTorch).
  if (with_bias) c.tolerance_scale = 2;
  c.run = [=](const Tensors& x, const OpArgs& a) {
    return Tensors{run_conv(x[0], x[1], with_bias ? x[2] : Tensor(), a)};
  };
  c.reference = [=](const Refs& x, const OpArgs& a) {
    const Geometry g = geometry(x[0].shape, x[1].shape, a);
    RefTensor out = ref_filled({g.n, g.o, g.oh, g.ow}, x[0].dtype, 0.0);
    if (with_bias) {
      for_each_index(out.shape,
                     [&](const std::vector<int64_t>& i) { out.values[flat_index(out.shape, i)] = x[2].at({i[1]}); });
    }
    for_each_tap(g, [&](int64_t n, int64_t o, int64_t oy, int64_t ox, int64_t c_in, int64_t ci, int64_t ky, int64_t kx,
                        int64_t y, int64_t xx) {
      out.values[flat_index(out.shape, {n, o, oy, ox})] += x[0].at({n, c_in, y, xx}) * x[1].at({o, ci, ky, kx});
    });
    return Refs{out};
  };
  return c;
}

// Input and weight gradients for a given output gradient: conv2d_backward_input and
// conv2d_backward_weight (with the bias gradient) through autograd.
OpCase backward_case() {
  OpCase c;
  c.name = "conv2d_backward";
  c.ops = {"conv2d", "requires_grad_", "backward"};
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{{-1.0, 1.0}}};
  c.shapes = conv_shapes(true, true);
  c.allow_empty = false;
  // The input gradient sums O / groups * KH * KW products, the weight's and bias's N * OH * OW.
  c.sum_terms = [](const std::vector<Shape>& s, const OpArgs& a) {
    const Shape &w = s[1], &dy = s[3];
    return std::max(w[0] / a.params[6] * w[2] * w[3], dy[0] * dy[2] * dy[3]);
  };
  c.run = [](const Tensors& x, const OpArgs& a) {
    Tensor input = x[0].detach().requires_grad_(true), weight = x[1].detach().requires_grad_(true);
    Tensor bias = x[2].detach().requires_grad_(true);
    run_conv(input, weight, bias, a).backward(x[3]);
    return Tensors{input.grad(), weight.grad(), bias.grad()};
  };
  c.reference = [](const Refs& x, const OpArgs& a) {
    const Geometry g = geometry(x[0].shape, x[1].shape, a);
    RefTensor dx = ref_filled(x[0].shape, x[0].dtype, 0.0), dw = ref_filled(x[1].shape, x[1].dtype, 0.0);
    RefTensor db = ref_filled(x[2].shape, x[2].dtype, 0.0);
    for_each_index(x[3].shape, [&](const std::vector<int64_t>& i) { db.values[i[1]] += x[3].at(i); });
    for_each_tap(g, [&](int64_t n, int64_t o, int64_t oy, int64_t ox, int64_t c_in, int64_t ci, int64_t ky, int64_t kx,
                        int64_t y, int64_t xx) {
      const double dy = x[3].at({n, o, oy, ox});
      dx.values[flat_index(dx.shape, {n, c_in, y, xx})] += dy * x[1].at({o, ci, ky, kx});
      dw.values[flat_index(dw.shape, {o, ci, ky, kx})] += dy * x[0].at({n, c_in, y, xx});
    });
    return Refs{dx, dw, db};
  };
  return c;
}

// All three passes of a 3x3 convolution with sums long enough (tens to hundreds of products) that
// 16-bit accumulation would show, in bfloat16 and float16: the output, and the input and weight
// gradients for a given output gradient. Inputs: x, weight, dy.
OpCase long_sums_case() {
  OpCase c;
  c.name = "conv2d_long_sums";
  c.ops = {"conv2d", "requires_grad_", "backward"};
  c.dtypes = {kBFloat16, kFloat16};
  c.inputs = {InputSpec{{-1.0, 1.0}}};
  c.shapes = [](Rng& rng, OpArgs& a, bool) {
    const int64_t stride = rng.integer(1, 2), n = 2, channels = rng.pick<int64_t>({5, 7}),
                  out = rng.pick<int64_t>({3, 4});
    const int64_t h = rng.pick<int64_t>({9, 11}), w = rng.pick<int64_t>({9, 11});
    a.params = {stride, stride, 1, 1, 1, 1, 1};
    std::vector<Shape> shapes = {{n, channels, h, w}, {out, channels, 3, 3}};
    const Geometry g = geometry(shapes[0], shapes[1], a);
    shapes.push_back({n, out, g.oh, g.ow});
    return shapes;
  };
  c.allow_empty = false;
  c.sum_terms = [](const std::vector<Shape>& s, const OpArgs&) {
    return std::max({s[0][1] * 9, s[1][0] * 9, s[2][0] * s[2][2] * s[2][3]});
  };
  c.run = [](const Tensors& x, const OpArgs& a) {
    Tensor input = x[0].detach().requires_grad_(true), weight = x[1].detach().requires_grad_(true);
    Tensor y = run_conv(input, weight, Tensor(), a);
    y.backward(x[2]);
    return Tensors{y, input.grad(), weight.grad()};
  };
  c.reference = [](const Refs& x, const OpArgs& a) {
    const Geometry g = geometry(x[0].shape, x[1].shape, a);
    RefTensor y = ref_filled(x[2].shape, x[0].dtype, 0.0);
    RefTensor dx = ref_filled(x[0].shape, x[0].dtype, 0.0), dw = ref_filled(x[1].shape, x[1].dtype, 0.0);
    for_each_tap(g, [&](int64_t n, int64_t o, int64_t oy, int64_t ox, int64_t c_in, int64_t ci, int64_t ky, int64_t kx,
                        int64_t iy, int64_t ix) {
      const double dy = x[2].at({n, o, oy, ox});
      y.values[flat_index(y.shape, {n, o, oy, ox})] += x[0].at({n, c_in, iy, ix}) * x[1].at({o, ci, ky, kx});
      dx.values[flat_index(dx.shape, {n, c_in, iy, ix})] += dy * x[1].at({o, ci, ky, kx});
      dw.values[flat_index(dw.shape, {o, ci, ky, kx})] += dy * x[0].at({n, c_in, iy, ix});
    });
    return Refs{y, dx, dw};
  };
  return c;
}

}  // namespace

std::vector<OpCase> conv_cases() {
  return {forward_case(false), forward_case(true), backward_case(), long_sums_case()};
}

}  // namespace ember::test
