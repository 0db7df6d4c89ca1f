// Pooling cases: max pooling (values and indices, with ties and several NaNs per window), average
// pooling (padding counted or not, ceil_mode) and adaptive average pooling (odd sizes, outputs
// larger than the input), forward and backward through autograd with a given output gradient, on
// random geometry, the harness's layouts and channels-last inputs; and the geometries PyTorch
// rejects, which must raise. The float64 references walk each window element by element.
#include <cmath>
#include <limits>

#include "autograd/functional.h"
#include "tests/core/op_cases.h"

namespace ember::test {

namespace {

using Tensors = std::vector<Tensor>;
using Refs = std::vector<RefTensor>;

enum class Pool { Max, Avg, Adaptive };

// A trial's geometry, carried in OpArgs::params in this order. Adaptive pooling uses only
// out_h and out_w.
struct Window {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode, count_include_pad, out_h, out_w;
};

Window window_of(const OpArgs& a) {
  const auto& p = a.params;
  return {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11]};
}

std::vector<int64_t> params_of(const Window& w) {
  return {w.kh, w.kw, w.sh, w.sw, w.ph, w.pw, w.dh, w.dw, w.ceil_mode, w.count_include_pad, w.out_h, w.out_w};
}

// PyTorch's output length: windows of the dilated kernel stepping over the padded input, the
// partial last one kept under ceil_mode only when it starts inside the input or its left padding.
int64_t pooled_length(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode) {
  const double steps = static_cast<double>(in + 2 * pad - dilation * (kernel - 1) - 1) / static_cast<double>(stride);
  int64_t out = static_cast<int64_t>(ceil_mode ? std::ceil(steps) : std::floor(steps)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Whether every max-pooling window along an axis holds at least one input element (a window
// entirely in the padding has no maximum; PyTorch never makes one with pad <= kernel / 2
// unless dilation spreads the window over the padding alone).
bool every_window_reaches_input(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad,
                                int64_t dilation) {
  for (int64_t o = 0; o < out; ++o) {
    bool reaches = false;
    for (int64_t k = 0; k < kernel; ++k) {
      const int64_t i = o * stride - pad + k * dilation;
      reaches = reaches || (i >= 0 && i < in);
    }
    if (!reaches) return false;
  }
  return true;
}

// A random window for an input of H x W (kernel, stride, padding up to half the kernel, dilation
// up to max_dilation, ceil_mode), or for adaptive pooling an output size, sometimes larger than
// the input. The output size follows, and may be < 1.
Window draw_window(Rng& rng, Pool pool, const Shape& x, int64_t max_dilation) {
  Window w{};
  if (pool == Pool::Adaptive) {
    w.out_h = rng.integer(1, x[2] + 2);
    w.out_w = rng.integer(1, x[3] + 2);
    return w;
  }
  w.kh = rng.integer(1, 4);
  w.kw = rng.integer(1, 4);
  w.sh = rng.integer(1, 3);
  w.sw = rng.integer(1, 3);
  w.ph = rng.integer(0, w.kh / 2);
  w.pw = rng.integer(0, w.kw / 2);
  w.dh = pool == Pool::Max ? rng.integer(1, max_dilation) : 1;
  w.dw = pool == Pool::Max ? rng.integer(1, max_dilation) : 1;
  w.ceil_mode = rng.chance(0.5);
  w.count_include_pad = rng.chance(0.5);
  w.out_h = pooled_length(x[2], w.kh, w.sh, w.ph, w.dh, w.ceil_mode);
  w.out_w = pooled_length(x[3], w.kw, w.sw, w.pw, w.dw, w.ceil_mode);
  return w;
}

bool windows_reach_input(const Shape& x, const Window& w) {
  return every_window_reaches_input(x[2], w.out_h, w.kh, w.sh, w.ph, w.dh) &&
         every_window_reaches_input(x[3], w.out_w, w.kw, w.sw, w.pw, w.dw);
}

// Input [N, C, H, W] (N sometimes 0, which PyTorch accepts), then with_grad an output gradient
// [N, C, OH, OW].
ShapeGenerator pool_shapes(Pool pool, bool with_grad) {
  return [=](Rng& rng, OpArgs& a, bool) {
    for (;;) {
      const Shape x = {rng.chance(0.1) ? 0 : rng.integer(1, 2), rng.integer(1, 3), rng.integer(1, 9),
                       rng.integer(1, 9)};
      const Window w = draw_window(rng, pool, x, 2);
      if (w.out_h < 1 || w.out_w < 1 || (pool == Pool::Max && !windows_reach_input(x, w))) continue;
      a.params = params_of(w);
      std::vector<Shape> shapes = {x};
      if (with_grad) shapes.push_back({x[0], x[1], w.out_h, w.out_w});
      return shapes;
    }
  };
}

// The geometries PyTorch rejects, each raised at the call whatever the backend.
enum class Defect {
  AllPaddingWindow,  // a max-pooling window that dilation spreads over the padding alone
  OutputTooSmall,    // the (dilated) window does not fit the padded input
  PaddingOverHalf,   // pad > kernel / 2 along an axis
  EmptyPlane,        // C, H or W is 0
};

// Inputs whose geometry has `defect` (and only that one).
ShapeGenerator defective_pool_shapes(Pool pool, Defect defect) {
  return [=](Rng& rng, OpArgs& a, bool) {
    for (;;) {
      Shape x = {rng.integer(1, 2), rng.integer(1, 3), rng.integer(1, 6), rng.integer(1, 6)};
      Window w = draw_window(rng, pool, x, defect == Defect::AllPaddingWindow ? 6 : 2);
      const bool fits = w.out_h >= 1 && w.out_w >= 1;
      if (defect == Defect::OutputTooSmall && fits) continue;
      if (defect != Defect::OutputTooSmall && !fits) continue;
      if (defect == Defect::AllPaddingWindow && windows_reach_input(x, w)) continue;
      if (defect != Defect::AllPaddingWindow && pool == Pool::Max && fits && !windows_reach_input(x, w)) continue;
      if (defect == Defect::PaddingOverHalf) {
        // Past half the kernel on one axis or both; the output size is then never < 1.
        if (rng.chance(0.5))
          w.ph = rng.integer(w.kh / 2 + 1, w.kh + 1);
        else
          w.pw = rng.integer(w.kw / 2 + 1, w.kw + 1);
      }
      if (defect == Defect::EmptyPlane) x[rng.integer(1, 3)] = 0;
      a.params = params_of(w);
      return std::vector<Shape>{x};
    }
  };
}

// The same values in NHWC memory: what a channels-last network hands to pooling.
Tensor channels_last(const Tensor& x) { return x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

// Whole numbers in [-3, 3] of 2 or more become NaN (2 in 7): windows hold none, one or several,
// and several NaNs are common in windows of 4 or more.
Tensor with_nans(const Tensor& x) {
  const TensorOptions options(x.dtype());
  return where(x.ge(full({}, 2, options)), full({}, std::numeric_limits<double>::quiet_NaN(), options), x);
}

RefTensor ref_with_nans(RefTensor x) {
  for (double& v : x.values)
    if (v >= 2) v = std::numeric_limits<double>::quiet_NaN();
  return x;
}

Tensor run_pool(Pool pool, const Tensor& x, const Window& w, Tensor* indices = nullptr) {
  switch (pool) {
    case Pool::Max: {
      auto [y, i] =
          max_pool2d_with_indices(x, {w.kh, w.kw}, Size2{w.sh, w.sw}, {w.ph, w.pw}, {w.dh, w.dw}, w.ceil_mode != 0);
      if (indices) *indices = i;
      return y;
    }
    case Pool::Avg:
      return avg_pool2d(x, {w.kh, w.kw}, Size2{w.sh, w.sw}, {w.ph, w.pw}, w.ceil_mode != 0, w.count_include_pad != 0);
    case Pool::Adaptive:
      return adaptive_avg_pool2d(x, {w.out_h, w.out_w});
  }
  return {};
}

// Calls fn(plane, oy, ox, elements) for every output, with the flat H*W positions of the input
// elements its window holds, in row-major window order, and the count of window elements inside
// the padded input (the divisor that counts padding).
template <typename Fn>
void for_each_window(Pool pool, const Shape& x, const Window& w, Fn fn) {
  const int64_t planes = x[0] * x[1], h = x[2], wd = x[3];
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t oy = 0; oy < w.out_h; ++oy)
      for (int64_t ox = 0; ox < w.out_w; ++ox) {
        std::vector<int64_t> inside;
        int64_t padded = 0;
        if (pool == Pool::Adaptive) {
          const auto lo = [](int64_t o, int64_t in, int64_t out) { return (o * in) / out; };
          const auto hi = [](int64_t o, int64_t in, int64_t out) {
            return static_cast<int64_t>(std::ceil(static_cast<double>((o + 1) * in) / static_cast<double>(out)));
          };
          for (int64_t iy = lo(oy, h, w.out_h); iy < hi(oy, h, w.out_h); ++iy)
            for (int64_t ix = lo(ox, wd, w.out_w); ix < hi(ox, wd, w.out_w); ++ix) inside.push_back(iy * wd + ix);
        } else {
          for (int64_t ky = 0; ky < w.kh; ++ky)
            for (int64_t kx = 0; kx < w.kw; ++kx) {
              const int64_t iy = oy * w.sh - w.ph + ky * w.dh, ix = ox * w.sw - w.pw + kx * w.dw;
              if (iy < h + w.ph && ix < wd + w.pw) ++padded;  // the padded input ends at in + pad
              if (iy >= 0 && iy < h && ix >= 0 && ix < wd) inside.push_back(iy * wd + ix);
            }
        }
        fn(plane, (plane * w.out_h + oy) * w.out_w + ox, inside, padded);
      }
}

// (values, flat indices) of max pooling: the first maximum of each window, or its last NaN in
// row-major window order (PyTorch 1.13's CPU and CUDA kernels: every NaN replaces the best so far).
Refs ref_max_pool(const RefTensor& x, const Window& w) {
  const Shape out_shape = {x.shape[0], x.shape[1], w.out_h, w.out_w};
  RefTensor values{out_shape, x.dtype, std::vector<double>(static_cast<size_t>(count_elements(out_shape)))};
  RefTensor indices{out_shape, kInt64, values.values};
  const int64_t plane_size = x.shape[2] * x.shape[3];
  for_each_window(Pool::Max, x.shape, w, [&](int64_t plane, int64_t o, const std::vector<int64_t>& inside, int64_t) {
    int64_t best = inside[0];
    for (int64_t i : inside) {
      const double v = x.values[static_cast<size_t>(plane * plane_size + i)];
      const double b = x.values[static_cast<size_t>(plane * plane_size + best)];
      if (std::isnan(v) || (!std::isnan(b) && v > b)) best = i;
    }
    values.values[static_cast<size_t>(o)] = x.values[static_cast<size_t>(plane * plane_size + best)];
    indices.values[static_cast<size_t>(o)] = static_cast<double>(best);
  });
  return {values, indices};
}

double divisor(Pool pool, const Window& w, const std::vector<int64_t>& inside, int64_t padded) {
  return static_cast<double>(pool == Pool::Avg && w.count_include_pad ? padded : static_cast<int64_t>(inside.size()));
}

RefTensor ref_avg_pool(Pool pool, const RefTensor& x, const Window& w) {
  const Shape out_shape = {x.shape[0], x.shape[1], w.out_h, w.out_w};
  RefTensor out{out_shape, x.dtype, std::vector<double>(static_cast<size_t>(count_elements(out_shape)))};
  const int64_t plane_size = x.shape[2] * x.shape[3];
  for_each_window(pool, x.shape, w, [&](int64_t plane, int64_t o, const std::vector<int64_t>& inside, int64_t padded) {
    double sum = 0;
    for (int64_t i : inside) sum += x.values[static_cast<size_t>(plane * plane_size + i)];
    out.values[static_cast<size_t>(o)] = sum / divisor(pool, w, inside, padded);
  });
  return out;
}

// The input gradient: each output's gradient goes to its maximum, or is shared by its window.
RefTensor ref_pool_backward(Pool pool, const RefTensor& x, const RefTensor& grad, const Window& w) {
  RefTensor dx{x.shape, grad.dtype, std::vector<double>(x.values.size(), 0.0)};
  const int64_t plane_size = x.shape[2] * x.shape[3];
  const RefTensor argmax = pool == Pool::Max ? ref_max_pool(x, w)[1] : RefTensor{};
  for_each_window(pool, x.shape, w, [&](int64_t plane, int64_t o, const std::vector<int64_t>& inside, int64_t padded) {
    const double g = grad.values[static_cast<size_t>(o)];
    if (pool == Pool::Max) {
      dx.values[static_cast<size_t>(plane * plane_size +
                                    static_cast<int64_t>(argmax.values[static_cast<size_t>(o)]))] += g;
      return;
    }
    for (int64_t i : inside)
      dx.values[static_cast<size_t>(plane * plane_size + i)] += g / divisor(pool, w, inside, padded);
  });
  return dx;
}

OpCase pool_case(const std::string& name, Pool pool, ValueRange range) {
  OpCase c;
  c.name = name;
  c.ops = {pool == Pool::Max ? "max_pool2d" : pool == Pool::Avg ? "avg_pool2d" : "adaptive_avg_pool2d"};
  c.dtypes = kFloatingDTypes;
  c.inputs = {InputSpec{range}};
  c.shapes = pool_shapes(pool, false);
  c.allow_empty = false;
  return c;
}

}  // namespace

std::vector<OpCase> pool_cases() {
  std::vector<OpCase> cases;
  // Whole numbers in a narrow range: ties in most windows, and the first maximum must win.
  const ValueRange ties{-2.0, 2.0, true};
  for (bool layout_channels_last : {false, true}) {
    const std::string suffix = layout_channels_last ? "_channels_last" : "";
    const auto layout = [layout_channels_last](const Tensor& x) { return layout_channels_last ? channels_last(x) : x; };

    OpCase max = pool_case("max_pool2d" + suffix, Pool::Max, ties);
    max.run = [layout](const Tensors& x, const OpArgs& a) {
      Tensor indices;
      Tensor y = run_pool(Pool::Max, layout(x[0]), window_of(a), &indices);
      return Tensors{y, indices};
    };
    max.reference = [](const Refs& x, const OpArgs& a) { return ref_max_pool(x[0], window_of(a)); };
    cases.push_back(max);

    for (Pool pool : {Pool::Avg, Pool::Adaptive}) {
      OpCase avg = pool_case((pool == Pool::Avg ? "avg_pool2d" : "adaptive_avg_pool2d") + suffix, pool, {});
      avg.run = [layout, pool](const Tensors& x, const OpArgs& a) {
        return Tensors{run_pool(pool, layout(x[0]), window_of(a))};
      };
      avg.reference = [pool](const Refs& x, const OpArgs& a) { return Refs{ref_avg_pool(pool, x[0], window_of(a))}; };
      cases.push_back(avg);
    }
  }

  const ValueRange nan_range{-3.0, 3.0, true};
  OpCase nan = pool_case("max_pool2d_nan", Pool::Max, nan_range);
  nan.run = [](const Tensors& x, const OpArgs& a) {
    Tensor indices;
    Tensor y = run_pool(Pool::Max, with_nans(x[0]), window_of(a), &indices);
    return Tensors{y, indices};
  };
  nan.reference = [](const Refs& x, const OpArgs& a) { return ref_max_pool(ref_with_nans(x[0]), window_of(a)); };
  cases.push_back(nan);

  // A window's gradient goes to the NaN its index names; with ties among the other values.
  OpCase nan_backward = pool_case("max_pool2d_nan_backward", Pool::Max, nan_range);
  nan_backward.inputs = {InputSpec{nan_range}, InputSpec{ties}};
  nan_backward.shapes = pool_shapes(Pool::Max, true);
  nan_backward.ops.insert(nan_backward.ops.end(), {"requires_grad_", "backward"});
  nan_backward.run = [](const Tensors& x, const OpArgs& a) {
    Tensor leaf = with_nans(x[0]).detach().requires_grad_();
    run_pool(Pool::Max, leaf, window_of(a)).backward(x[1]);
    return Tensors{leaf.grad()};
  };
  nan_backward.reference = [](const Refs& x, const OpArgs& a) {
    return Refs{ref_pool_backward(Pool::Max, ref_with_nans(x[0]), x[1], window_of(a))};
  };
  cases.push_back(nan_backward);

  // Backward through autograd: the output gradient is a harness input, so it arrives strided,
  // expanded or transposed. Max pooling's ties decide where the gradient goes.
  for (Pool pool : {Pool::Max, Pool::Avg, Pool::Adaptive}) {
    const std::string name = pool == Pool::Max   ? "max_pool2d"
                             : pool == Pool::Avg ? "avg_pool2d"
                                                 : "adaptive_avg_pool2d";
    OpCase c = pool_case(name + "_backward", pool, pool == Pool::Max ? ties : ValueRange{});
    // Max pooling's gradients are whole numbers: a 16-bit sum of them is exact whatever its
    // order, while the CPU rounds after each term (the average pools sum in float).
    c.inputs = {InputSpec{c.inputs[0].range}, InputSpec{pool == Pool::Max ? ties : ValueRange{}}};
    c.shapes = pool_shapes(pool, true);
    c.ops.insert(c.ops.end(), {"requires_grad_", "backward"});
    c.run = [pool](const Tensors& x, const OpArgs& a) {
      Tensor leaf = x[0].detach().requires_grad_();
      run_pool(pool, leaf, window_of(a)).backward(x[1]);
      return Tensors{leaf.grad()};
    };
    c.reference = [pool](const Refs& x, const OpArgs& a) {
      return Refs{ref_pool_backward(pool, x[0], x[1], window_of(a))};
    };
    cases.push_back(c);
  }

  // Raised at the call, before any backend runs: the messages are PyTorch's.
  const struct {
    Pool pool;
    Defect defect;
    const char* name;
    const char* message;
  } rejected[] = {
      {Pool::Max, Defect::AllPaddingWindow, "max_pool2d_all_padding_window", "output size is too small"},
      {Pool::Max, Defect::OutputTooSmall, "max_pool2d_output_too_small", "output size is too small"},
      {Pool::Avg, Defect::OutputTooSmall, "avg_pool2d_output_too_small", "output size is too small"},
      {Pool::Max, Defect::PaddingOverHalf, "max_pool2d_padding_over_half", "pad should be at most half"},
      {Pool::Avg, Defect::PaddingOverHalf, "avg_pool2d_padding_over_half", "pad should be at most half"},
      {Pool::Max, Defect::EmptyPlane, "max_pool2d_empty_plane", "with non-zero C, H and W"},
      {Pool::Avg, Defect::EmptyPlane, "avg_pool2d_empty_plane", "with non-zero C, H and W"},
      {Pool::Adaptive, Defect::EmptyPlane, "adaptive_avg_pool2d_empty_plane", "with non-zero C, H and W"},
  };
  for (const auto& r : rejected) {
    OpCase c = pool_case(r.name, r.pool, {});
    c.shapes = defective_pool_shapes(r.pool, r.defect);
    c.expect_error = r.message;
    c.run = [pool = r.pool](const Tensors& x, const OpArgs& a) { return Tensors{run_pool(pool, x[0], window_of(a))}; };
    cases.push_back(c);
  }
  return cases;
}

}  // namespace ember::test
