// Reduction kernels. Long reductions take a block per output: each thread folds a strided share
// of the reduced elements, warps merge with shuffles, and the warps' results meet in shared
// memory. Short reductions (or very many outputs) take a thread per output. The accumulator,
// identity, fold and final value are formula::Reducer's, as on the CPU.
#include <cstring>
#include <type_traits>

#include "core/reduce_math.h"
#include "cuda/kernels/loops.cuh"
#include "cuda/kernels/entries.h"

namespace ember::cuda {

namespace {

constexpr int kWarps = kBlockThreads / 32;

// Byte offsets of kept (output) element k in the input, the output and the index output.
__device__ __forceinline__ void kept_offsets(const ReduceLoop& loop, int64_t k, int64_t& in, int64_t& out,
                                             int64_t& out2) {
  in = out = out2 = 0;
  for (int d = 0; d < loop.nkept; ++d) {
    const int64_t index = k % loop.kept_sizes[d];
    k /= loop.kept_sizes[d];
    in += index * loop.kept_in_strides[d];
    out += index * loop.kept_out_strides[d];
    out2 += index * loop.kept_out2_strides[d];
  }
}

__device__ __forceinline__ int64_t reduced_offset(const ReduceLoop& loop, int64_t r) {
  if (loop.nreduced == 1) return r * loop.reduced_in_strides[0];
  int64_t off = 0;
  for (int d = 0; d < loop.nreduced; ++d) {
    off += (r % loop.reduced_sizes[d]) * loop.reduced_in_strides[d];
    r /= loop.reduced_sizes[d];
  }
  return off;
}

// __shfl_down_sync of any trivially copyable value (a Welford accumulator is 24 bytes), moved as
// raw 64-bit words where it divides into them (one exchange per word in the emulator), else 32-bit.
template <typename T>
__device__ __forceinline__ T shuffle_down(T value, int delta) {
  using Word = std::conditional_t<sizeof(T) % 8 == 0, unsigned long long, unsigned>;
  constexpr int kWords = (sizeof(T) + sizeof(Word) - 1) / sizeof(Word);
  Word words[kWords] = {};
  memcpy(words, &value, sizeof(T));
  EMBER_UNROLL
  for (int i = 0; i < kWords; ++i) words[i] = __shfl_down_sync(0xffffffffu, words[i], delta);
  memcpy(&value, words, sizeof(T));
  return value;
}

template <typename T, typename Out, ReduceOp Op>
__global__ void __launch_bounds__(kBlockThreads)
    reduce_block_kernel(const __grid_constant__ ReduceLoop loop, double p) {
  using R = formula::Reducer<T, Op>;
  using Acc = typename R::Acc;
  using C = typename R::C;
  R r;
  r.p = p;
  __shared__ Acc warp_results[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t k = blockIdx.x; k < loop.kept_numel; k += gridDim.x) {
    int64_t in_off, out_off, out2_off;
    kept_offsets(loop, k, in_off, out_off, out2_off);
    Acc acc = r.init();
    for (int64_t i = threadIdx.x; i < loop.reduced_numel; i += blockDim.x)
      r.add(acc, static_cast<C>(*reinterpret_cast<const T*>(loop.in + in_off + reduced_offset(loop, i))));
    for (int delta = 16; delta > 0; delta /= 2) r.merge(acc, shuffle_down(acc, delta));
    if (lane == 0) warp_results[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < static_cast<int>(blockDim.x / 32) ? warp_results[lane] : r.init();
      for (int delta = 16; delta > 0; delta /= 2) r.merge(acc, shuffle_down(acc, delta));
      if (lane == 0) *reinterpret_cast<Out*>(loop.out + out_off) = r.template finish<Out>(acc, loop.reduced_numel);
    }
    __syncthreads();  // warp_results is reused by the next output
  }
}

template <typename T, typename Out, ReduceOp Op>
__global__ void __launch_bounds__(kBlockThreads)
    reduce_thread_kernel(const __grid_constant__ ReduceLoop loop, double p) {
  using R = formula::Reducer<T, Op>;
  using C = typename R::C;
  R r;
  r.p = p;
  for (const int64_t k : grid_stride(loop.kept_numel)) {
    int64_t in_off, out_off, out2_off;
    kept_offsets(loop, k, in_off, out_off, out2_off);
    typename R::Acc acc = r.init();
    for (int64_t i = 0; i < loop.reduced_numel; ++i)
      r.add(acc, static_cast<C>(*reinterpret_cast<const T*>(loop.in + in_off + reduced_offset(loop, i))));
    *reinterpret_cast<Out*>(loop.out + out_off) = r.template finish<Out>(acc, loop.reduced_numel);
  }
}

// A block per output when each reduction is long enough to share out.
bool block_per_output(const ReduceLoop& loop) { return loop.reduced_numel >= 64 && loop.kept_numel < 65536; }

template <typename T, typename Out, ReduceOp Op>
void reduce_typed(const ReduceLoop& loop, double p, const char* name) {
  DeviceGuard guard(loop.device.index);
  cudaStream_t stream = current_stream().handle();
  if (block_per_output(loop)) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(loop.kept_numel, 65535));
    constexpr auto kernel = &reduce_block_kernel<T, Out, Op>;
    EMBER_LAUNCH(kernel, dim3(blocks), dim3(kBlockThreads), 0, stream, loop, p);
  } else {
    constexpr auto kernel = &reduce_thread_kernel<T, Out, Op>;
    EMBER_LAUNCH(kernel, dim3(grid_for(loop.kept_numel)), dim3(kBlockThreads), 0, stream, loop, p);
  }
  check_launch(name);
}

template <typename T, typename Out>
void reduce_for_type(ReduceOp op, const ReduceLoop& loop, double p) {
  const char* name = reduce_op_name(op);
  switch (op) {
    case ReduceOp::Sum:
      return reduce_typed<T, Out, ReduceOp::Sum>(loop, p, name);
    case ReduceOp::Mean:
      return reduce_typed<T, Out, ReduceOp::Mean>(loop, p, name);
    case ReduceOp::Prod:
      return reduce_typed<T, Out, ReduceOp::Prod>(loop, p, name);
    case ReduceOp::Amax:
      return reduce_typed<T, Out, ReduceOp::Amax>(loop, p, name);
    case ReduceOp::Amin:
      return reduce_typed<T, Out, ReduceOp::Amin>(loop, p, name);
    case ReduceOp::Norm:
      if constexpr (std::is_floating_point_v<ComputeType<T>>)
        return reduce_typed<T, Out, ReduceOp::Norm>(loop, p, name);
      else
        detail::unsupported_dtype("norm", dtype_of<T>());
    case ReduceOp::Var:
      if constexpr (std::is_floating_point_v<ComputeType<T>>)
        return reduce_typed<T, Out, ReduceOp::Var>(loop, p, name);
      else
        detail::unsupported_dtype("var", dtype_of<T>());
    case ReduceOp::Std:
      if constexpr (std::is_floating_point_v<ComputeType<T>>)
        return reduce_typed<T, Out, ReduceOp::Std>(loop, p, name);
      else
        detail::unsupported_dtype("std", dtype_of<T>());
  }
}

// (best, index) absorbs (v, i); an index of -1 means no candidate yet.
template <typename C>
__device__ __forceinline__ void arg_absorb(bool is_max, C& best, int64_t& index, C v, int64_t i) {
  if (i < 0) return;
  if (index < 0 || formula::arg_merge_takes_other<C>(is_max, best, index, v, i)) {
    best = v;
    index = i;
  }
}

template <typename C>
__device__ __forceinline__ void arg_warp_merge(bool is_max, C& best, int64_t& index) {
  for (int delta = 16; delta > 0; delta /= 2) {
    const C v = shuffle_down(best, delta);
    const int64_t i = shuffle_down(index, delta);
    arg_absorb(is_max, best, index, v, i);
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    arg_reduce_block_kernel(const __grid_constant__ ReduceLoop loop, bool is_max) {
  using C = ComputeType<T>;
  __shared__ C warp_values[kWarps];
  __shared__ int64_t warp_indices[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t k = blockIdx.x; k < loop.kept_numel; k += gridDim.x) {
    int64_t in_off, out_off, out2_off;
    kept_offsets(loop, k, in_off, out_off, out2_off);
    C best = C(0);
    int64_t index = -1;
    for (int64_t i = threadIdx.x; i < loop.reduced_numel; i += blockDim.x) {
      const C v = static_cast<C>(*reinterpret_cast<const T*>(loop.in + in_off + reduced_offset(loop, i)));
      if (index < 0 || formula::arg_better<C>(is_max, v, best)) {
        best = v;
        index = i;
      }
    }
    arg_warp_merge(is_max, best, index);
    if (lane == 0) {
      warp_values[warp] = best;
      warp_indices[warp] = index;
    }
    __syncthreads();
    if (warp == 0) {
      const bool has = lane < static_cast<int>(blockDim.x / 32);
      best = has ? warp_values[lane] : C(0);
      index = has ? warp_indices[lane] : -1;
      arg_warp_merge(is_max, best, index);
      if (lane == 0) {
        *reinterpret_cast<T*>(loop.out + out_off) = static_cast<T>(best);
        *reinterpret_cast<int64_t*>(loop.out2 + out2_off) = index;
      }
    }
    __syncthreads();
  }
}

}  // namespace

void reduce_kernel(ReduceOp op, const ReduceLoop& loop, double p) {
  if (loop.kept_numel == 0) return;
  if (loop.out_dtype == loop.in_dtype) {
    EMBER_DISPATCH_ALL(loop.in_dtype, reduce_op_name(op), [&] { reduce_for_type<scalar_t, scalar_t>(op, loop, p); });
    return;
  }
  EMBER_CHECK(loop.out_dtype == kInt64, reduce_op_name(op), ": unsupported output dtype ", dtype_name(loop.out_dtype));
  switch (loop.in_dtype) {
    case kInt32:
      return reduce_for_type<int32_t, int64_t>(op, loop, p);
    case kUInt8:
      return reduce_for_type<uint8_t, int64_t>(op, loop, p);
    case kBool:
      return reduce_for_type<bool, int64_t>(op, loop, p);
    default:
      detail::unsupported_dtype(reduce_op_name(op), loop.in_dtype);
  }
}

void arg_reduce_kernel(bool is_max, const ReduceLoop& loop) {
  if (loop.kept_numel == 0) return;
  const char* name = is_max ? "max" : "min";
  DeviceGuard guard(loop.device.index);
  cudaStream_t stream = current_stream().handle();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(loop.kept_numel, 65535));
  EMBER_DISPATCH_ALL(loop.in_dtype, name, [&] {
    EMBER_LAUNCH(arg_reduce_block_kernel<scalar_t>, dim3(blocks), dim3(kBlockThreads), 0, stream, loop, is_max);
  });
  check_launch(name);
}

}  // namespace ember::cuda
