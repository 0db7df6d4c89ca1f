// Pooling kernels, a thread per element written. Forward passes run per output; backward passes
// run per input element and gather the gradients of the windows covering it, in the order the
// CPU kernel adds them: no atomics, and results that match the CPU to the bit. Every tensor here
// is NCHW-contiguous (layouts are converted on the device first): N*C planes of H x W inputs and
// OH x OW outputs. Window arithmetic and the max rule come from core/pool_math.h.
#include <limits>

#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/pool_math.h"
#include "cuda/kernels/loops.cuh"
#include "cuda/kernels/entries.h"

namespace ember::cuda {

namespace {

// The input plane and the window, by value. The adaptive pools use only out_h and out_w.
struct Planes {
  int64_t h, w;
  PoolParams p;
};

// (plane, row, column) of element i of a stack of rows x cols planes.
struct PlaneIndex {
  int64_t plane, y, x;
};

__device__ __forceinline__ PlaneIndex split(int64_t i, int64_t rows, int64_t cols) {
  return {i / (rows * cols), (i / cols) % rows, i % cols};
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    max_pool_kernel(const T* x, T* y, int64_t* indices, int64_t total, const __grid_constant__ Planes g) {
  using C = ComputeType<T>;
  const PoolParams& p = g.p;
  for (const int64_t o : grid_stride(total)) {
    const PlaneIndex at = split(o, p.out_h, p.out_w);
    const T* in = x + at.plane * g.h * g.w;
    C best = -std::numeric_limits<C>::infinity();
    int64_t best_index = -1;
    for (int64_t ki = 0; ki < p.kernel_h; ++ki) {
      const int64_t iy = formula::max_pool_position(at.y, ki, p.stride_h, p.pad_h, p.dilation_h);
      if (iy < 0 || iy >= g.h) continue;
      for (int64_t kj = 0; kj < p.kernel_w; ++kj) {
        const int64_t ix = formula::max_pool_position(at.x, kj, p.stride_w, p.pad_w, p.dilation_w);
        if (ix < 0 || ix >= g.w) continue;
        const C v = static_cast<C>(in[iy * g.w + ix]);
        if (formula::max_pool_takes(v, best, best_index >= 0)) {
          best = v;
          best_index = iy * g.w + ix;
        }
      }
    }
    y[o] = static_cast<T>(best);
    indices[o] = best_index;
  }
}

// Each input element sums the gradients of the outputs whose index names it. Window element k
// lies under output (i + pad - k dilation) / stride, so walking k downwards visits those outputs
// in row-major order, and the sum rounds to T after each term, as the CPU's scatter_add does.
template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    max_pool_backward_kernel(const T* dy, const int64_t* indices, T* dx, int64_t total,
                             const __grid_constant__ Planes g) {
  using C = ComputeType<T>;
  const PoolParams& p = g.p;
  for (const int64_t i : grid_stride(total)) {
    const PlaneIndex at = split(i, g.h, g.w);
    const int64_t target = at.y * g.w + at.x, first = at.plane * p.out_h * p.out_w;
    T sum = static_cast<T>(C(0));
    for (int64_t ki = p.kernel_h - 1; ki >= 0; --ki) {
      const int64_t oy = formula::max_pool_output_through(at.y, ki, p.out_h, p.stride_h, p.pad_h, p.dilation_h);
      if (oy < 0) continue;
      for (int64_t kj = p.kernel_w - 1; kj >= 0; --kj) {
        const int64_t ox = formula::max_pool_output_through(at.x, kj, p.out_w, p.stride_w, p.pad_w, p.dilation_w);
        const int64_t o = first + oy * p.out_w + ox;
        if (ox >= 0 && indices[o] == target) sum = static_cast<T>(static_cast<C>(sum) + static_cast<C>(dy[o]));
      }
    }
    dx[i] = sum;
  }
}

// Sums in double, divides in double, then rounds through the compute type, as the CPU does.
template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    avg_pool_kernel(const T* x, T* y, int64_t total, const __grid_constant__ Planes g) {
  using C = ComputeType<T>;
  const PoolParams& p = g.p;
  for (const int64_t o : grid_stride(total)) {
    const PlaneIndex at = split(o, p.out_h, p.out_w);
    const T* in = x + at.plane * g.h * g.w;
    const formula::PoolSpan sy = formula::avg_pool_span(at.y, g.h, p.kernel_h, p.stride_h, p.pad_h);
    const formula::PoolSpan sx = formula::avg_pool_span(at.x, g.w, p.kernel_w, p.stride_w, p.pad_w);
    double sum = 0;
    for (int64_t iy = sy.start; iy < sy.end; ++iy)
      for (int64_t ix = sx.start; ix < sx.end; ++ix) sum += static_cast<double>(static_cast<C>(in[iy * g.w + ix]));
    const int64_t count = formula::avg_pool_divisor(sy, sx, p.count_include_pad);
    y[o] = static_cast<T>(static_cast<C>(count > 0 ? sum / static_cast<double>(count) : 0.0));
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    avg_pool_backward_kernel(const T* dy, T* dx, int64_t total, const __grid_constant__ Planes g) {
  using C = ComputeType<T>;
  const PoolParams& p = g.p;
  for (const int64_t i : grid_stride(total)) {
    const PlaneIndex at = split(i, g.h, g.w);
    const T* grads = dy + at.plane * p.out_h * p.out_w;
    const formula::OutputRange ry = formula::avg_pool_outputs_covering(at.y, p.out_h, p.kernel_h, p.stride_h, p.pad_h);
    const formula::OutputRange rx = formula::avg_pool_outputs_covering(at.x, p.out_w, p.kernel_w, p.stride_w, p.pad_w);
    C sum = C(0);
    for (int64_t oy = ry.first; oy <= ry.last; ++oy) {
      const formula::PoolSpan sy = formula::avg_pool_span(oy, g.h, p.kernel_h, p.stride_h, p.pad_h);
      for (int64_t ox = rx.first; ox <= rx.last; ++ox) {
        const formula::PoolSpan sx = formula::avg_pool_span(ox, g.w, p.kernel_w, p.stride_w, p.pad_w);
        const C count = static_cast<C>(formula::avg_pool_divisor(sy, sx, p.count_include_pad));
        sum += static_cast<C>(static_cast<C>(grads[oy * p.out_w + ox]) / count);
      }
    }
    dx[i] = static_cast<T>(sum);
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    adaptive_avg_pool_kernel(const T* x, T* y, int64_t total, const __grid_constant__ Planes g) {
  using C = ComputeType<T>;
  const int64_t oh = g.p.out_h, ow = g.p.out_w;
  for (const int64_t o : grid_stride(total)) {
    const PlaneIndex at = split(o, oh, ow);
    const T* in = x + at.plane * g.h * g.w;
    const int64_t y0 = formula::adaptive_start(at.y, g.h, oh), y1 = formula::adaptive_end(at.y, g.h, oh);
    const int64_t x0 = formula::adaptive_start(at.x, g.w, ow), x1 = formula::adaptive_end(at.x, g.w, ow);
    double sum = 0;
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix) sum += static_cast<double>(static_cast<C>(in[iy * g.w + ix]));
    y[o] = static_cast<T>(static_cast<C>(sum / static_cast<double>((y1 - y0) * (x1 - x0))));
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    adaptive_avg_pool_backward_kernel(const T* dy, T* dx, int64_t total, const __grid_constant__ Planes g) {
  using C = ComputeType<T>;
  const int64_t oh = g.p.out_h, ow = g.p.out_w;
  for (const int64_t i : grid_stride(total)) {
    const PlaneIndex at = split(i, g.h, g.w);
    const T* grads = dy + at.plane * oh * ow;
    const formula::OutputRange ry = formula::adaptive_outputs_covering(at.y, g.h, oh);
    const formula::OutputRange rx = formula::adaptive_outputs_covering(at.x, g.w, ow);
    C sum = C(0);
    for (int64_t oy = ry.first; oy <= ry.last; ++oy) {
      const int64_t rows = formula::adaptive_end(oy, g.h, oh) - formula::adaptive_start(oy, g.h, oh);
      for (int64_t ox = rx.first; ox <= rx.last; ++ox) {
        const int64_t cols = formula::adaptive_end(ox, g.w, ow) - formula::adaptive_start(ox, g.w, ow);
        sum += static_cast<C>(static_cast<C>(grads[oy * ow + ox]) / static_cast<C>(rows * cols));
      }
    }
    dx[i] = static_cast<T>(sum);
  }
}

Tensor device_empty(const Shape& shape, DType dtype, Device device) {
  return empty(shape, TensorOptions(dtype).device(device));
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_kernel(const Tensor& input, const PoolParams& p) {
  NoGradGuard no_grad;
  DeviceGuard guard(input.device().index);
  const Tensor x = input.contiguous();
  Tensor y = device_empty({x.size(0), x.size(1), p.out_h, p.out_w}, x.dtype(), x.device());
  Tensor indices = device_empty(y.sizes(), kInt64, x.device());
  const int64_t total = y.numel();
  if (total == 0) return {y, indices};
  const Planes g{x.size(2), x.size(3), p};
  EMBER_DISPATCH_FLOATING(x.dtype(), "max_pool2d", [&] {
    EMBER_LAUNCH(max_pool_kernel<scalar_t>, dim3(grid_for(total)), dim3(kBlockThreads), 0, current_stream().handle(),
                 x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), indices.data_ptr<int64_t>(), total, g);
  });
  check_launch("max_pool2d");
  return {y, indices};
}

Tensor max_pool2d_backward_kernel(const Tensor& grad_output, const Tensor& indices, const Shape& input_shape,
                                  const PoolParams& p) {
  NoGradGuard no_grad;
  DeviceGuard guard(grad_output.device().index);
  const Tensor dy = grad_output.contiguous(), index = indices.contiguous();
  Tensor dx = device_empty(input_shape, dy.dtype(), dy.device());
  const int64_t total = dx.numel();
  if (total == 0) return dx;
  const Planes g{input_shape[2], input_shape[3], p};
  EMBER_DISPATCH_FLOATING(dy.dtype(), "max_pool2d backward", [&] {
    EMBER_LAUNCH(max_pool_backward_kernel<scalar_t>, dim3(grid_for(total)), dim3(kBlockThreads), 0,
                 current_stream().handle(), dy.data_ptr<scalar_t>(), index.data_ptr<int64_t>(), dx.data_ptr<scalar_t>(),
                 total, g);
  });
  check_launch("max_pool2d backward");
  return dx;
}

Tensor avg_pool2d_kernel(const Tensor& input, const PoolParams& p) {
  NoGradGuard no_grad;
  DeviceGuard guard(input.device().index);
  const Tensor x = input.contiguous();
  Tensor y = device_empty({x.size(0), x.size(1), p.out_h, p.out_w}, x.dtype(), x.device());
  const int64_t total = y.numel();
  if (total == 0) return y;
  const Planes g{x.size(2), x.size(3), p};
  EMBER_DISPATCH_FLOATING(x.dtype(), "avg_pool2d", [&] {
    EMBER_LAUNCH(avg_pool_kernel<scalar_t>, dim3(grid_for(total)), dim3(kBlockThreads), 0, current_stream().handle(),
                 x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), total, g);
  });
  check_launch("avg_pool2d");
  return y;
}

Tensor avg_pool2d_backward_kernel(const Tensor& grad_output, const Shape& input_shape, const PoolParams& p) {
  NoGradGuard no_grad;
  DeviceGuard guard(grad_output.device().index);
  const Tensor dy = grad_output.contiguous();
  Tensor dx = device_empty(input_shape, dy.dtype(), dy.device());
  const int64_t total = dx.numel();
  if (total == 0) return dx;
  const Planes g{input_shape[2], input_shape[3], p};
  EMBER_DISPATCH_FLOATING(dy.dtype(), "avg_pool2d backward", [&] {
    EMBER_LAUNCH(avg_pool_backward_kernel<scalar_t>, dim3(grid_for(total)), dim3(kBlockThreads), 0,
                 current_stream().handle(), dy.data_ptr<scalar_t>(), dx.data_ptr<scalar_t>(), total, g);
  });
  check_launch("avg_pool2d backward");
  return dx;
}

Tensor adaptive_avg_pool2d_kernel(const Tensor& input, int64_t out_h, int64_t out_w) {
  NoGradGuard no_grad;
  DeviceGuard guard(input.device().index);
  const Tensor x = input.contiguous();
  Tensor y = device_empty({x.size(0), x.size(1), out_h, out_w}, x.dtype(), x.device());
  const int64_t total = y.numel();
  if (total == 0) return y;
  Planes g{x.size(2), x.size(3), PoolParams{}};
  g.p.out_h = out_h;
  g.p.out_w = out_w;
  EMBER_DISPATCH_FLOATING(x.dtype(), "adaptive_avg_pool2d", [&] {
    EMBER_LAUNCH(adaptive_avg_pool_kernel<scalar_t>, dim3(grid_for(total)), dim3(kBlockThreads), 0,
                 current_stream().handle(), x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), total, g);
  });
  check_launch("adaptive_avg_pool2d");
  return y;
}

Tensor adaptive_avg_pool2d_backward_kernel(const Tensor& grad_output, const Shape& input_shape) {
  NoGradGuard no_grad;
  DeviceGuard guard(grad_output.device().index);
  const Tensor dy = grad_output.contiguous();
  Tensor dx = device_empty(input_shape, dy.dtype(), dy.device());
  const int64_t total = dx.numel();
  if (total == 0) return dx;
  Planes g{input_shape[2], input_shape[3], PoolParams{}};
  g.p.out_h = dy.size(2);
  g.p.out_w = dy.size(3);
  EMBER_DISPATCH_FLOATING(dy.dtype(), "adaptive_avg_pool2d backward", [&] {
    EMBER_LAUNCH(adaptive_avg_pool_backward_kernel<scalar_t>, dim3(grid_for(total)), dim3(kBlockThreads), 0,
                 current_stream().handle(), dy.data_ptr<scalar_t>(), dx.data_ptr<scalar_t>(), total, g);
  });
  check_launch("adaptive_avg_pool2d backward");
  return dx;
}

}  // namespace ember::cuda
