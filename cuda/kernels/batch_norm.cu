// Batch-norm kernels over dim 1 of [N, C, *]. Shapes: C channels, S = the spatial size, M = N * S
// values per channel. Activations are read in place in two dense layouts, [N, C, S] and
// channels-last (memory [rows, C]); other strides are first copied to contiguous on the device.
// The per-channel reductions (statistics, the backward's sums) give a block one channel of
// [N, C, S], whose threads walk its runs side by side, or up to 32 neighbouring channels of
// channels-last, so that a warp reads along a row. Results merge in a fixed order, with no atomics:
// the same input gives the same bits. A channel too long for one block is split over grid.y, and a
// second kernel merges the splits in order.
#include <algorithm>

#include "core/batch_norm_math.h"
#include "core/elementwise_math.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/reduce_math.h"
#include "cuda/kernels/entries.h"
#include "cuda/kernels/loops.cuh"

namespace ember::cuda {

namespace {

constexpr int kWarps = kBlockThreads / 32;
constexpr unsigned kFullWarp = 0xffffffffu;
// A reduction splits a channel over more blocks only while each keeps this many values, and only
// up to about this many blocks in all: enough to fill a large GPU, with a negligible second pass.
constexpr int64_t kMinValuesPerBlock = 4096;
constexpr int64_t kTargetBlocks = 1024;

DType compute_dtype(DType d) { return d == kFloat64 ? kFloat64 : kFloat32; }

// Blocks for a thread per item.
unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, (n + kBlockThreads - 1) / kBlockThreads));
}

bool is_channels_last(const Tensor& t) { return t.dim() >= 2 && t.stride(1) == 1 && is_dense(t); }

// The input as the kernels read it: channels-last kept, anything else made contiguous.
Tensor dense_activations(const Tensor& t) { return is_channels_last(t) ? t : t.contiguous(); }

// `t` with the memory layout of `x` (same strides) and x's dtype: dy and the ReLU output are
// addressed by x's offsets.
Tensor follow_layout(const Tensor& t, const Tensor& x) {
  EMBER_CHECK(t.sizes() == x.sizes(), "batch_norm backward: expected a tensor of shape ", shape_str(x.sizes()),
              ", got ", shape_str(t.sizes()));
  if (t.dtype() == x.dtype() && t.strides() == x.strides()) return t;
  Tensor out = empty_like(x);
  copy_into(out, t);
  return out;
}

// A per-channel tensor ([C]) in the compute dtype, contiguous; undefined stays undefined.
Tensor per_channel(const Tensor& t, DType ct, int64_t channels) {
  if (!t.defined()) return t;
  EMBER_CHECK(t.numel() == channels, "batch_norm: expected per-channel tensors of ", channels, " values, got ",
              shape_str(t.sizes()));
  return t.to(ct).contiguous();
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Where the i-th value of channel c lies (in elements): i = q * inner + r sits at
// q * outer_stride + c * channel_stride + r * inner_stride.
struct ChannelGeometry {
  int64_t channels = 0, per_channel = 0;
  int64_t inner = 1, inner_stride = 1, outer_stride = 0, channel_stride = 0;
  bool channels_last = false;
};

ChannelGeometry channel_geometry(const Tensor& x) {
  ChannelGeometry g;
  g.channels = x.size(1);
  g.per_channel = g.channels > 0 ? x.numel() / g.channels : 0;
  g.channels_last = is_channels_last(x);
  if (g.channels_last) {
    g.inner = std::max<int64_t>(1, g.per_channel);
    g.inner_stride = g.channels;
    g.channel_stride = 1;
  } else {
    const int64_t spatial = x.size(0) > 0 ? g.per_channel / x.size(0) : 0;
    g.inner = std::max<int64_t>(1, spatial);
    g.outer_stride = g.channels * spatial;
    g.channel_stride = spatial;
  }
  return g;
}

// ---- per-channel reductions ----

// What a Fold supplies: Acc (trivially constructible, for __shared__), identity(), add(acc, channel,
// offset) for the value at element offset `offset`, merge, shuffle_down (a warp shuffle of an Acc),
// and finish(channel, acc), which writes the channel's results.
template <class Fold>
struct ChannelReduce {
  ChannelGeometry geometry;
  Fold fold;
  int64_t chunk = 0;                       // values of a channel per split (grid.y)
  typename Fold::Acc* partials = nullptr;  // [splits, C] when split
};

template <class Fold>
__global__ void __launch_bounds__(kBlockThreads) channel_reduce_kernel(const __grid_constant__ ChannelReduce<Fold> r) {
  using Acc = typename Fold::Acc;
  __shared__ Acc warp_results[kWarps][32];
  const ChannelGeometry& g = r.geometry;
  const int tile = static_cast<int>(blockDim.x);
  const int tid = static_cast<int>(threadIdx.y) * tile + static_cast<int>(threadIdx.x);
  const int lane = tid % 32, warp = tid / 32;
  const int64_t channel = static_cast<int64_t>(blockIdx.x) * tile + threadIdx.x;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * r.chunk;
  const int64_t end = begin + r.chunk < g.per_channel ? begin + r.chunk : g.per_channel;
  Acc acc = Fold::identity();
  if (channel < g.channels) {
    // i advances by blockDim.y; q and rem follow it without a division per value.
    const int64_t step = blockDim.y, step_q = step / g.inner, step_r = step % g.inner;
    int64_t i = begin + threadIdx.y, q = i / g.inner, rem = i % g.inner;
    const int64_t base = channel * g.channel_stride;
    for (; i < end; i += step) {
      r.fold.add(acc, channel, base + q * g.outer_stride + rem * g.inner_stride);
      q += step_q;
      rem += step_r;
      if (rem >= g.inner) {
        rem -= g.inner;
        ++q;
      }
    }
  }
  // Lanes a multiple of `tile` apart hold the same channel.
  for (int delta = 16; delta >= tile; delta /= 2) Fold::merge(acc, Fold::shuffle_down(acc, delta));
  if (lane < tile) warp_results[warp][lane] = acc;
  __syncthreads();
  if (tid < tile) {
    acc = warp_results[0][tid];
    for (int w = 1; w < kWarps; ++w) Fold::merge(acc, warp_results[w][tid]);
    const int64_t c = static_cast<int64_t>(blockIdx.x) * tile + tid;
    if (c < g.channels) {
      if (gridDim.y == 1)
        r.fold.finish(c, acc);
      else
        r.partials[static_cast<int64_t>(blockIdx.y) * g.channels + c] = acc;
    }
  }
}

// The second pass of a split reduction: a thread per channel merges its splits in order.
template <class Fold>
__global__ void __launch_bounds__(kBlockThreads)
    channel_merge_kernel(const __grid_constant__ ChannelReduce<Fold> r, int splits) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= r.geometry.channels) return;
  typename Fold::Acc acc = r.partials[c];
  for (int s = 1; s < splits; ++s) Fold::merge(acc, r.partials[static_cast<int64_t>(s) * r.geometry.channels + c]);
  r.fold.finish(c, acc);
}

template <class Fold>
void reduce_channels(const ChannelGeometry& g, const Fold& fold, Device device, const char* name) {
  if (g.channels == 0) return;
  int tile = 1;
  if (g.channels_last)
    while (tile < 32 && tile < g.channels) tile *= 2;
  const int64_t tiles = (g.channels + tile - 1) / tile;
  const int64_t by_work = std::max<int64_t>(1, g.per_channel * tile / kMinValuesPerBlock);
  const int64_t by_occupancy = std::max<int64_t>(1, kTargetBlocks / tiles);
  int64_t splits = std::min<int64_t>({by_work, by_occupancy, 65535});
  ChannelReduce<Fold> r{g, fold, (g.per_channel + splits - 1) / splits, nullptr};
  if (r.chunk > 0)
    splits = (g.per_channel + r.chunk - 1) / r.chunk;
  else
    splits = 1;
  DeviceGuard guard(device.index);
  Tensor partials;  // freed at return: its stream's later work runs after both kernels
  if (splits > 1) {
    const int64_t bytes = splits * g.channels * static_cast<int64_t>(sizeof(typename Fold::Acc));
    partials = empty({bytes}, TensorOptions(kUInt8).device(device));
    r.partials = static_cast<typename Fold::Acc*>(partials.data_ptr());
  }
  cudaStream_t stream = current_stream().handle();
  constexpr auto reduce = &channel_reduce_kernel<Fold>;
  EMBER_LAUNCH(reduce, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)),
               dim3(static_cast<unsigned>(tile), static_cast<unsigned>(kBlockThreads / tile)), 0, stream, r);
  check_launch(name);
  if (splits > 1) {
    constexpr auto merge = &channel_merge_kernel<Fold>;
    EMBER_LAUNCH(merge, dim3(blocks_for(g.channels)), dim3(kBlockThreads), 0, stream, r, static_cast<int>(splits));
    check_launch(name);
  }
}

// Mean and biased variance, one Welford pass; partial results merge by Chan's rule.
template <typename T>
struct StatsFold {
  using C = ComputeType<T>;
  using Acc = formula::Welford;
  const T* x;
  C* mean;
  C* var;

  __device__ static Acc identity() { return Acc{0.0, 0.0, 0}; }
  __device__ void add(Acc& acc, int64_t, int64_t offset) const {
    acc.add(static_cast<double>(static_cast<C>(x[offset])));
  }
  __device__ static void merge(Acc& acc, const Acc& other) { acc.merge(other); }
  __device__ static Acc shuffle_down(const Acc& a, int delta) {
    return Acc{__shfl_down_sync(kFullWarp, a.mean, delta), __shfl_down_sync(kFullWarp, a.m2, delta),
               __shfl_down_sync(kFullWarp, a.n, delta)};
  }
  // No values: mean 0 and variance 0/0 = NaN, as on the CPU.
  __device__ void finish(int64_t c, const Acc& acc) const {
    mean[c] = static_cast<C>(acc.mean);
    var[c] = static_cast<C>(acc.variance(0.0));
  }
};

struct GradSums {
  double sum_dy, sum_dy_xmu;
};

// sum(dy) and sum(dy * (x - mean)), dy masked by the fused ReLU's output when there is one.
template <typename T>
struct GradSumsFold {
  using C = ComputeType<T>;
  using Acc = GradSums;
  const T* dy;
  const T* x;
  const T* relu_output;  // null without the fused ReLU
  const C* mean;
  C* sum_dy;
  C* sum_dy_xmu;

  __device__ static Acc identity() { return Acc{0.0, 0.0}; }
  __device__ void add(Acc& acc, int64_t channel, int64_t offset) const {
    C g = static_cast<C>(dy[offset]);
    if (relu_output != nullptr) g = formula::keep_where_positive(g, static_cast<C>(relu_output[offset]));
    const C centred = static_cast<C>(x[offset]) - mean[channel];
    acc.sum_dy += static_cast<double>(g);
    acc.sum_dy_xmu += static_cast<double>(g) * static_cast<double>(centred);
  }
  __device__ static void merge(Acc& acc, const Acc& other) {
    acc.sum_dy += other.sum_dy;
    acc.sum_dy_xmu += other.sum_dy_xmu;
  }
  __device__ static Acc shuffle_down(const Acc& a, int delta) {
    return Acc{__shfl_down_sync(kFullWarp, a.sum_dy, delta), __shfl_down_sync(kFullWarp, a.sum_dy_xmu, delta)};
  }
  __device__ void finish(int64_t c, const Acc& acc) const {
    sum_dy[c] = static_cast<C>(acc.sum_dy);
    sum_dy_xmu[c] = static_cast<C>(acc.sum_dy_xmu);
  }
};

// ---- elementwise passes: per-channel coefficients first, then one pass over the activations ----

// Element m of a layout belongs to channel (m / plane) % C: plane is S for [N, C, S], 1 for
// channels-last.
struct ElementGeometry {
  int64_t numel = 0, plane = 1, channels = 1;
  __device__ __forceinline__ int64_t channel(int64_t m) const { return (m / plane) % channels; }
};

ElementGeometry element_geometry(const Tensor& x) {
  const ChannelGeometry g = channel_geometry(x);
  return ElementGeometry{x.numel(), g.channels_last ? 1 : g.inner, std::max<int64_t>(1, g.channels)};
}

// scale_shift[c] = scale, scale_shift[C + c] = shift.
template <typename C>
__global__ void __launch_bounds__(kBlockThreads)
    affine_coefficients_kernel(const C* mean, const C* invstd, const C* weight, const C* bias, int64_t channels,
                               C* scale_shift) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const formula::BatchNormAffine<C> affine = formula::batch_norm_affine<C>(
      mean[c], invstd[c], weight != nullptr ? weight[c] : C(1), bias != nullptr ? bias[c] : C(0));
  scale_shift[c] = affine.scale;
  scale_shift[channels + c] = affine.shift;
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    apply_kernel(const ElementGeometry g, const T* x, const ComputeType<T>* scale_shift, bool relu, T* y) {
  using C = ComputeType<T>;
  for (const int64_t m : grid_stride(g.numel)) {
    const int64_t c = g.channel(m);
    y[m] = static_cast<T>(
        formula::batch_norm_output(static_cast<C>(x[m]), scale_shift[c], scale_shift[g.channels + c], relu));
  }
}

// kab[c], kab[C + c], kab[2C + c] = k, a, b of formula::batch_norm_input_grad.
template <typename C>
__global__ void __launch_bounds__(kBlockThreads)
    input_grad_coefficients_kernel(const C* mean, const C* invstd, const C* weight, const C* sum_dy,
                                   const C* sum_dy_xmu, int64_t count, int64_t channels, C* kab) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const formula::BatchNormInputGrad<C> coefficients = formula::batch_norm_input_grad<C>(
      mean[c], invstd[c], weight != nullptr ? static_cast<double>(weight[c]) : 1.0, sum_dy[c], sum_dy_xmu[c], count);
  kab[c] = coefficients.k;
  kab[channels + c] = coefficients.a;
  kab[2 * channels + c] = coefficients.b;
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    input_grad_kernel(const ElementGeometry g, const T* dy, const T* x, const T* relu_output, const ComputeType<T>* kab,
                      T* dx) {
  using C = ComputeType<T>;
  for (const int64_t m : grid_stride(g.numel)) {
    const int64_t c = g.channel(m);
    C grad = static_cast<C>(dy[m]);
    if (relu_output != nullptr) grad = formula::keep_where_positive(grad, static_cast<C>(relu_output[m]));
    dx[m] = static_cast<T>(formula::batch_norm_input_grad_element(grad, static_cast<C>(x[m]), kab[c],
                                                                  kab[g.channels + c], kab[2 * g.channels + c]));
  }
}

void check_floating(const Tensor& t, const char* op) {
  EMBER_CHECK(is_floating(t.dtype()), op, ": expected a floating tensor, got ", dtype_name(t.dtype()));
  EMBER_CHECK(t.dim() >= 2, op, ": expected input of at least 2 dims [N, C, ...], got ", shape_str(t.sizes()));
}

}  // namespace

std::pair<Tensor, Tensor> batch_norm_stats_kernel(const Tensor& input) {
  NoGradGuard no_grad;
  check_floating(input, "batch_norm");
  const Tensor x = dense_activations(input);
  const ChannelGeometry g = channel_geometry(x);
  const TensorOptions options = TensorOptions(compute_dtype(x.dtype())).device(x.device());
  Tensor mean = empty({g.channels}, options), var = empty({g.channels}, options);
  EMBER_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using C = ComputeType<scalar_t>;
    const StatsFold<scalar_t> fold{x.data_ptr<scalar_t>(), mean.data_ptr<C>(), var.data_ptr<C>()};
    reduce_channels(g, fold, x.device(), "batch_norm_stats");
  });
  return {mean, var};
}

Tensor batch_norm_apply_kernel(const Tensor& input, const Tensor& mean_in, const Tensor& invstd_in,
                               const Tensor& weight_in, const Tensor& bias_in, bool relu) {
  NoGradGuard no_grad;
  check_floating(input, "batch_norm");
  const Tensor x = dense_activations(input);
  const int64_t channels = x.size(1);
  const DType ct = compute_dtype(x.dtype());
  const Tensor mean = per_channel(mean_in, ct, channels), invstd = per_channel(invstd_in, ct, channels);
  const Tensor weight = per_channel(weight_in, ct, channels), bias = per_channel(bias_in, ct, channels);
  Tensor y = empty_like(x);
  if (x.numel() == 0) return y;
  Tensor scale_shift = empty({2 * channels}, TensorOptions(ct).device(x.device()));
  const ElementGeometry g = element_geometry(x);
  DeviceGuard guard(x.device().index);
  cudaStream_t stream = current_stream().handle();
  EMBER_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using C = ComputeType<scalar_t>;
    constexpr auto coefficients = &affine_coefficients_kernel<C>;
    EMBER_LAUNCH(coefficients, dim3(blocks_for(channels)), dim3(kBlockThreads), 0, stream, mean.data_ptr<C>(),
                 invstd.data_ptr<C>(), data_or_null<C>(weight), data_or_null<C>(bias), channels,
                 scale_shift.data_ptr<C>());
    check_launch("batch_norm");
    constexpr auto apply = &apply_kernel<scalar_t>;
    EMBER_LAUNCH(apply, dim3(grid_for(g.numel)), dim3(kBlockThreads), 0, stream, g, x.data_ptr<scalar_t>(),
                 scale_shift.data_ptr<C>(), relu, y.data_ptr<scalar_t>());
    check_launch("batch_norm");
  });
  return y;
}

namespace {

// x, dy and the ReLU output in one dtype (x's, or the compute dtype when they differ) and one
// dense layout (x's).
struct BackwardOperands {
  Tensor x, dy, relu_output;
};

BackwardOperands backward_operands(const Tensor& grad_output, const Tensor& input, const Tensor& relu_output) {
  check_floating(input, "batch_norm backward");
  DType dtype = input.dtype();
  if (grad_output.dtype() != dtype || (relu_output.defined() && relu_output.dtype() != dtype))
    dtype = compute_dtype(dtype);
  BackwardOperands ops;
  ops.x = dense_activations(input.to(dtype));
  ops.dy = follow_layout(grad_output.to(dtype), ops.x);
  if (relu_output.defined()) ops.relu_output = follow_layout(relu_output.to(dtype), ops.x);
  return ops;
}

}  // namespace

std::pair<Tensor, Tensor> batch_norm_backward_reduce_kernel(const Tensor& grad_output, const Tensor& input,
                                                            const Tensor& mean_in, const Tensor& relu_output) {
  NoGradGuard no_grad;
  const BackwardOperands ops = backward_operands(grad_output, input, relu_output);
  const ChannelGeometry g = channel_geometry(ops.x);
  const DType ct = compute_dtype(ops.x.dtype());
  const Tensor mean = per_channel(mean_in, ct, g.channels);
  const TensorOptions options = TensorOptions(ct).device(ops.x.device());
  Tensor sum_dy = empty({g.channels}, options), sum_dy_xmu = empty({g.channels}, options);
  EMBER_DISPATCH_FLOATING(ops.x.dtype(), "batch_norm backward", [&] {
    using C = ComputeType<scalar_t>;
    const GradSumsFold<scalar_t> fold{
        ops.dy.data_ptr<scalar_t>(), ops.x.data_ptr<scalar_t>(), data_or_null<scalar_t>(ops.relu_output),
        mean.data_ptr<C>(),          sum_dy.data_ptr<C>(),       sum_dy_xmu.data_ptr<C>()};
    reduce_channels(g, fold, ops.x.device(), "batch_norm_backward_reduce");
  });
  return {sum_dy, sum_dy_xmu};
}

Tensor batch_norm_backward_input_kernel(const Tensor& grad_output, const Tensor& input, const Tensor& mean_in,
                                        const Tensor& invstd_in, const Tensor& weight_in, const Tensor& sum_dy_in,
                                        const Tensor& sum_dy_xmu_in, int64_t count, const Tensor& relu_output) {
  NoGradGuard no_grad;
  const BackwardOperands ops = backward_operands(grad_output, input, relu_output);
  const int64_t channels = ops.x.size(1);
  const DType ct = compute_dtype(ops.x.dtype());
  const Tensor mean = per_channel(mean_in, ct, channels), invstd = per_channel(invstd_in, ct, channels);
  const Tensor weight = per_channel(weight_in, ct, channels);
  const Tensor sum_dy = per_channel(sum_dy_in, ct, channels), sum_dy_xmu = per_channel(sum_dy_xmu_in, ct, channels);
  Tensor dx = empty_like(ops.x);
  if (dx.numel() > 0) {
    Tensor kab = empty({3 * channels}, TensorOptions(ct).device(ops.x.device()));
    const ElementGeometry g = element_geometry(ops.x);
    DeviceGuard guard(ops.x.device().index);
    cudaStream_t stream = current_stream().handle();
    EMBER_DISPATCH_FLOATING(ops.x.dtype(), "batch_norm backward", [&] {
      using C = ComputeType<scalar_t>;
      constexpr auto coefficients = &input_grad_coefficients_kernel<C>;
      EMBER_LAUNCH(coefficients, dim3(blocks_for(channels)), dim3(kBlockThreads), 0, stream, mean.data_ptr<C>(),
                   invstd.data_ptr<C>(), data_or_null<C>(weight), sum_dy.data_ptr<C>(), sum_dy_xmu.data_ptr<C>(), count,
                   channels, kab.data_ptr<C>());
      check_launch("batch_norm backward");
      constexpr auto input_grad = &input_grad_kernel<scalar_t>;
      EMBER_LAUNCH(input_grad, dim3(grid_for(g.numel)), dim3(kBlockThreads), 0, stream, g, ops.dy.data_ptr<scalar_t>(),
                   ops.x.data_ptr<scalar_t>(), data_or_null<scalar_t>(ops.relu_output), kab.data_ptr<C>(),
                   dx.data_ptr<scalar_t>());
      check_launch("batch_norm backward");
    });
  }
  return dx.to(grad_output.dtype());
}

}  // namespace ember::cuda
