// A thread per written element. col2im gathers (each image element sums the few columns that
// read it) instead of scattering with atomics: deterministic, and 16-bit types need no atomics;
// 16-bit images sum float32 columns, rounding once.
#include "core/elementwise_math.h"
#include "cuda/kernels/im2col.cuh"
#include "cuda/kernels/loops.cuh"

namespace ember::cuda {

namespace {

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    im2col_kernel(const __grid_constant__ ConvGeometry g, const T* __restrict__ input, T* __restrict__ col) {
  const int64_t pixels = g.out_h * g.out_w, window = g.kernel_h * g.kernel_w;
  const int64_t total = g.images * g.channels * window * pixels;
  for (const int64_t i : grid_stride(total)) {
    const int64_t ow = i % g.out_w, oh = i / g.out_w % g.out_h;
    const int64_t kw = i / pixels % g.kernel_w, kh = i / (pixels * g.kernel_w) % g.kernel_h;
    const int64_t plane = i / (pixels * window);  // image * channels + channel
    const int64_t h = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
    const int64_t w = ow * g.stride_w - g.pad_w + kw * g.dilation_w;
    const bool inside = h >= 0 && h < g.height && w >= 0 && w < g.width;
    col[i] = inside ? input[(plane * g.height + h) * g.width + w] : T(0.0f);
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    col2im_kernel(const __grid_constant__ ConvGeometry g, const ComputeType<T>* __restrict__ col,
                  T* __restrict__ image) {
  using C = ComputeType<T>;
  const int64_t pixels = g.out_h * g.out_w, window = g.kernel_h * g.kernel_w;
  const int64_t total = g.images * g.channels * g.height * g.width;
  for (const int64_t i : grid_stride(total)) {
    const int64_t w = i % g.width, h = i / g.width % g.height, plane = i / (g.width * g.height);
    const C* plane_col = col + plane * window * pixels;
    C sum = C(0);
    for (int64_t kh = 0; kh < g.kernel_h; ++kh) {
      const int64_t th = h + g.pad_h - kh * g.dilation_h;  // oh * stride_h when this tap reads (h, w)
      if (th < 0 || th % g.stride_h != 0 || th / g.stride_h >= g.out_h) continue;
      const int64_t oh = th / g.stride_h;
      for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
        const int64_t tw = w + g.pad_w - kw * g.dilation_w;
        if (tw < 0 || tw % g.stride_w != 0 || tw / g.stride_w >= g.out_w) continue;
        const int64_t ow = tw / g.stride_w;
        sum += plane_col[(kh * g.kernel_w + kw) * pixels + oh * g.out_w + ow];
      }
    }
    image[i] = static_cast<T>(sum);
  }
}

}  // namespace

void im2col(const ConvGeometry& g, DType dtype, Device device, const void* input, void* col) {
  const int64_t total = g.images * g.channels * g.kernel_h * g.kernel_w * g.out_h * g.out_w;
  if (total == 0) return;
  DeviceGuard guard(device.index);
  EMBER_DISPATCH_FLOATING(dtype, "conv2d", [&] {
    constexpr auto kernel = &im2col_kernel<scalar_t>;
    EMBER_LAUNCH(kernel, dim3(grid_for(total)), dim3(kBlockThreads), 0, current_stream().handle(), g,
                 static_cast<const scalar_t*>(input), static_cast<scalar_t*>(col));
  });
  check_launch("conv2d (im2col)");
}

void col2im(const ConvGeometry& g, DType dtype, Device device, const void* col, void* image) {
  const int64_t total = g.images * g.channels * g.height * g.width;
  if (total == 0) return;
  DeviceGuard guard(device.index);
  EMBER_DISPATCH_FLOATING(dtype, "conv2d backward", [&] {
    constexpr auto kernel = &col2im_kernel<scalar_t>;
    EMBER_LAUNCH(kernel, dim3(grid_for(total)), dim3(kBlockThreads), 0, current_stream().handle(), g,
                 static_cast<const ComputeType<scalar_t>*>(col), static_cast<scalar_t*>(image));
  });
  check_launch("conv2d backward (col2im)");
}

}  // namespace ember::cuda
