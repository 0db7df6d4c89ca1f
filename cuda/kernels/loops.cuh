// Running a StridedLoop on a CUDA device: the loop travels to the kernel by value (a
// DeviceLoop), each thread walks elements grid-stride, and an element's byte offsets in each
// operand come from its linear index. One-element CPU operands (StridedLoop::host_scalars) are
// read on the host at launch and reach the kernel as values.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/loop.h"
#include "cuda/api.h"
#include "cuda/check.h"
#include "cuda/lang.h"

namespace ember::cuda {

constexpr int kBlockThreads = 256;

template <int N>
struct DeviceLoop {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxLoopDims] = {};
  int64_t strides[N][kMaxLoopDims] = {};
  char* data[N] = {};

  // Byte offsets of linear element i (innermost dim fastest) in each operand.
  __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[N]) const {
    if (ndim == 1) {
      EMBER_UNROLL
      for (int k = 0; k < N; ++k) off[k] = i * strides[k][0];
      return;
    }
    EMBER_UNROLL
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = 0; d < ndim; ++d) {
      const int64_t index = i % sizes[d];
      i /= sizes[d];
      EMBER_UNROLL
      for (int k = 0; k < N; ++k) off[k] += index * strides[k][d];
    }
  }
};

template <int N>
DeviceLoop<N> device_loop(const StridedLoop& loop) {
  DeviceLoop<N> out;
  out.ndim = loop.ndim;
  out.numel = loop.numel;
  for (int d = 0; d < loop.ndim; ++d) {
    out.sizes[d] = loop.sizes[d];
    for (int k = 0; k < N; ++k) out.strides[k][d] = loop.strides[k][d];
  }
  for (int k = 0; k < N; ++k) out.data[k] = (loop.host_scalars >> k) & 1u ? nullptr : loop.data[k];
  return out;
}

// Operand k's value when it is a host scalar (read now, on the host), else T{}.
template <typename T>
T host_scalar(const StridedLoop& loop, int k) {
  return (loop.host_scalars >> k) & 1u ? *reinterpret_cast<const T*>(loop.data[k]) : T{};
}

// Operand k of element `off`: from device memory, or the host scalar passed by value.
template <typename T>
__device__ __forceinline__ T load_operand(const char* base, int64_t off, T scalar) {
  return base != nullptr ? *reinterpret_cast<const T*>(base + off) : scalar;
}

// The linear indices [0, total) this thread takes in a grid-stride loop: its global index, then
// strides of the whole grid's thread count.
//   for (const int64_t i : grid_stride(n)) out[i] = f(in[i]);
struct GridStride {
  struct Iterator {
    int64_t i, step;
    __device__ __forceinline__ int64_t operator*() const { return i; }
    __device__ __forceinline__ Iterator& operator++() {
      i += step;
      return *this;
    }
    __device__ __forceinline__ bool operator!=(const Iterator& end) const { return i < end.i; }
  };
  int64_t first, step, total;
  __device__ __forceinline__ Iterator begin() const { return {first, step}; }
  __device__ __forceinline__ Iterator end() const { return {total, step}; }
};

__device__ __forceinline__ GridStride grid_stride(int64_t total) {
  return {static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, static_cast<int64_t>(gridDim.x) * blockDim.x,
          total};
}

// Calls op(loop.data, offsets) for every element; op is a functor with a __device__ operator().
template <int N, class Op>
__global__ void __launch_bounds__(kBlockThreads)
    elementwise_kernel(const __grid_constant__ DeviceLoop<N> loop, const Op op) {
  for (const int64_t i : grid_stride(loop.numel)) {
    int64_t off[N];
    loop.offsets(i, off);
    op(loop.data, off);
  }
}

inline unsigned grid_for(int64_t numel) {
  // A few elements per thread and a bounded grid: the grid-stride loop takes the rest.
  const int64_t blocks = (numel + kBlockThreads * 4 - 1) / (kBlockThreads * 4);
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 4096)));
}

// Queues op over `loop` on the current stream of the loop's device.
template <int N, class Op>
void launch_elementwise(const StridedLoop& loop, const Op& op, const char* name) {
  if (loop.numel == 0) return;
  DeviceGuard guard(loop.device.index);
  const DeviceLoop<N> dl = device_loop<N>(loop);
  constexpr auto kernel = &elementwise_kernel<N, Op>;
  EMBER_LAUNCH(kernel, dim3(grid_for(loop.numel)), dim3(kBlockThreads), 0, current_stream().handle(), dl, op);
  check_launch(name);
}

}  // namespace ember::cuda
