// CPU pooling: max (with PyTorch-style flat H*W indices), average, adaptive average; forward
// and backward side by side. Planes (n, c) are independent and run in parallel.
#include <limits>

#include "core/cpu/kernels.h"
#include "core/cpu/thread_pool.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/pool_math.h"

namespace ember::cpu {

namespace {

DType compute_dtype(DType d) { return d == kFloat64 ? kFloat64 : kFloat32; }

using formula::adaptive_end;
using formula::adaptive_start;

template <typename T>
void max_pool_typed(const T* x, T* y, int64_t* idx, int64_t planes, int64_t h, int64_t w, const PoolParams& p) {
  parallel_for(0, planes, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t plane = lo; plane < hi; ++plane) {
      const T* in = x + plane * h * w;
      for (int64_t oy = 0; oy < p.out_h; ++oy)
        for (int64_t ox = 0; ox < p.out_w; ++ox) {
          T best = -std::numeric_limits<T>::infinity();
          int64_t best_index = -1;
          for (int64_t ki = 0; ki < p.kernel_h; ++ki) {
            int64_t iy = formula::max_pool_position(oy, ki, p.stride_h, p.pad_h, p.dilation_h);
            if (iy < 0 || iy >= h) continue;
            for (int64_t kj = 0; kj < p.kernel_w; ++kj) {
              int64_t ix = formula::max_pool_position(ox, kj, p.stride_w, p.pad_w, p.dilation_w);
              if (ix < 0 || ix >= w) continue;
              T v = in[iy * w + ix];
              if (formula::max_pool_takes(v, best, best_index >= 0)) {
                best = v;
                best_index = iy * w + ix;
              }
            }
          }
          int64_t o = (plane * p.out_h + oy) * p.out_w + ox;
          y[o] = best;
          idx[o] = best_index;
        }
    }
  });
}

template <typename T>
void avg_pool_typed(const T* x, T* y, int64_t planes, int64_t h, int64_t w, const PoolParams& p) {
  parallel_for(0, planes, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t plane = lo; plane < hi; ++plane) {
      const T* in = x + plane * h * w;
      for (int64_t oy = 0; oy < p.out_h; ++oy)
        for (int64_t ox = 0; ox < p.out_w; ++ox) {
          const formula::PoolSpan sy = formula::avg_pool_span(oy, h, p.kernel_h, p.stride_h, p.pad_h);
          const formula::PoolSpan sx = formula::avg_pool_span(ox, w, p.kernel_w, p.stride_w, p.pad_w);
          double total = 0;
          for (int64_t iy = sy.start; iy < sy.end; ++iy)
            for (int64_t ix = sx.start; ix < sx.end; ++ix) total += in[iy * w + ix];
          int64_t count = formula::avg_pool_divisor(sy, sx, p.count_include_pad);
          y[(plane * p.out_h + oy) * p.out_w + ox] = static_cast<T>(count > 0 ? total / count : 0.0);
        }
    }
  });
}

template <typename T>
void avg_pool_backward_typed(const T* dy, T* dx, int64_t planes, int64_t h, int64_t w, const PoolParams& p) {
  parallel_for(0, planes, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t plane = lo; plane < hi; ++plane) {
      T* out = dx + plane * h * w;
      for (int64_t oy = 0; oy < p.out_h; ++oy)
        for (int64_t ox = 0; ox < p.out_w; ++ox) {
          const formula::PoolSpan sy = formula::avg_pool_span(oy, h, p.kernel_h, p.stride_h, p.pad_h);
          const formula::PoolSpan sx = formula::avg_pool_span(ox, w, p.kernel_w, p.stride_w, p.pad_w);
          int64_t count = formula::avg_pool_divisor(sy, sx, p.count_include_pad);
          if (count == 0) continue;
          T share = static_cast<T>(dy[(plane * p.out_h + oy) * p.out_w + ox] / static_cast<T>(count));
          for (int64_t iy = sy.start; iy < sy.end; ++iy)
            for (int64_t ix = sx.start; ix < sx.end; ++ix) out[iy * w + ix] += share;
        }
    }
  });
}

template <typename T>
void adaptive_avg_typed(const T* x, T* y, int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  parallel_for(0, planes, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t plane = lo; plane < hi; ++plane) {
      const T* in = x + plane * h * w;
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t y0 = adaptive_start(oy, h, oh), y1 = adaptive_end(oy, h, oh);
          int64_t x0 = adaptive_start(ox, w, ow), x1 = adaptive_end(ox, w, ow);
          double total = 0;
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix) total += in[iy * w + ix];
          y[(plane * oh + oy) * ow + ox] = static_cast<T>(total / static_cast<double>((y1 - y0) * (x1 - x0)));
        }
    }
  });
}

template <typename T>
void adaptive_avg_backward_typed(const T* dy, T* dx, int64_t planes, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  parallel_for(0, planes, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t plane = lo; plane < hi; ++plane) {
      T* out = dx + plane * h * w;
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t y0 = adaptive_start(oy, h, oh), y1 = adaptive_end(oy, h, oh);
          int64_t x0 = adaptive_start(ox, w, ow), x1 = adaptive_end(ox, w, ow);
          T share = static_cast<T>(dy[(plane * oh + oy) * ow + ox] / static_cast<T>((y1 - y0) * (x1 - x0)));
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix) out[iy * w + ix] += share;
        }
    }
  });
}

// Runs `body<T>` on a contiguous float32/float64 copy of the input; the output returns in the
// input's dtype.
template <typename Body>
Tensor with_compute_type(const Tensor& input, Body body) {
  NoGradGuard no_grad;
  DType ct = compute_dtype(input.dtype());
  Tensor x = input.to(ct).contiguous();
  Tensor y = ct == kFloat64 ? body.template operator()<double>(x) : body.template operator()<float>(x);
  return y.to(input.dtype());
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_kernel(const Tensor& input, const PoolParams& p) {
  const int64_t n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
  Tensor indices = empty({n, c, p.out_h, p.out_w}, TensorOptions(kInt64));
  Tensor out = with_compute_type(input, [&]<typename T>(const Tensor& x) {
    Tensor y = empty({n, c, p.out_h, p.out_w}, x.options());
    max_pool_typed<T>(x.data_ptr<T>(), y.data_ptr<T>(), indices.data_ptr<int64_t>(), n * c, h, w, p);
    return y;
  });
  return {out, indices};
}

Tensor max_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& indices, const Shape& input_shape,
                                  const PoolParams& p) {
  NoGradGuard no_grad;
  const int64_t planes = input_shape[0] * input_shape[1], hw = input_shape[2] * input_shape[3];
  Tensor grad_input = zeros(input_shape, grad_output.options());
  // Sizes spelled out: with an empty batch, view could not infer a -1.
  Tensor flat_grad = grad_output.contiguous().view({planes, p.out_h * p.out_w});
  Tensor flat_index = indices.contiguous().view({planes, p.out_h * p.out_w});
  scatter_add_kernel(grad_input.view({planes, hw}), 1, flat_index, flat_grad);
  return grad_input;
}

Tensor avg_pool2d_kernel(const Tensor& input, const PoolParams& p) {
  const int64_t n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
  return with_compute_type(input, [&]<typename T>(const Tensor& x) {
    Tensor y = empty({n, c, p.out_h, p.out_w}, x.options());
    avg_pool_typed<T>(x.data_ptr<T>(), y.data_ptr<T>(), n * c, h, w, p);
    return y;
  });
}

Tensor avg_pool2d_backward_kernel(const Tensor& grad_output, const Shape& input_shape, const PoolParams& p) {
  const int64_t n = input_shape[0], c = input_shape[1], h = input_shape[2], w = input_shape[3];
  return with_compute_type(grad_output, [&]<typename T>(const Tensor& dy) {
    Tensor dx = zeros(input_shape, dy.options());
    avg_pool_backward_typed<T>(dy.data_ptr<T>(), dx.data_ptr<T>(), n * c, h, w, p);
    return dx;
  });
}

Tensor adaptive_avg_pool2d_kernel(const Tensor& input, int64_t out_h, int64_t out_w) {
  const int64_t n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
  return with_compute_type(input, [&]<typename T>(const Tensor& x) {
    Tensor y = empty({n, c, out_h, out_w}, x.options());
    adaptive_avg_typed<T>(x.data_ptr<T>(), y.data_ptr<T>(), n * c, h, w, out_h, out_w);
    return y;
  });
}

Tensor adaptive_avg_pool2d_backward_kernel(const Tensor& grad_output, const Shape& input_shape) {
  const int64_t n = input_shape[0], c = input_shape[1], h = input_shape[2], w = input_shape[3];
  const int64_t oh = grad_output.size(2), ow = grad_output.size(3);
  return with_compute_type(grad_output, [&]<typename T>(const Tensor& dy) {
    Tensor dx = zeros(input_shape, dy.options());
    adaptive_avg_backward_typed<T>(dy.data_ptr<T>(), dx.data_ptr<T>(), n * c, h, w, oh, ow);
    return dx;
  });
}

}  // namespace ember::cpu
