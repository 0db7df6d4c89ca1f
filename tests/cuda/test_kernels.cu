// The kernels behind tests/cuda/test_kernels.h.
#include "tests/cuda/test_kernels.h"

namespace ember::testing {

namespace {

__global__ void block_reduce_sum_kernel(const float* x, int n, float* out) {
  __shared__ float partial[1024];
  const int tid = threadIdx.x;
  float sum = 0;
  for (int i = blockIdx.x * blockDim.x + tid; i < n; i += gridDim.x * blockDim.x) sum += x[i];
  partial[tid] = sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride >= 32; stride /= 2) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    __syncthreads();
  }
  if (tid < 32) {
    float v = partial[tid];
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (tid == 0) atomicAdd(out, v);
  }
}

__global__ void shift_kernel(const float* in, float* out, int n, bool with_barrier) {
  __shared__ float s[1024];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? in[i] : 0.0f;
  if (with_barrier) __syncthreads();
  if (i < n) out[i] = threadIdx.x > 0 ? s[threadIdx.x - 1] : 0.0f;
}

__global__ void divergent_kernel(int arrive, bool other_site) {
  if (static_cast<int>(threadIdx.x) < arrive) {
    __syncthreads();
  } else if (other_site) {
    __syncthreads();
  }
}

__global__ void reverse_kernel(const float* x, float* out, int n, int shared_floats, bool overrun) {
  EMBER_DYNAMIC_SHARED(float, buffer);
  const int base = blockIdx.x * blockDim.x, tid = threadIdx.x;
  if (tid < shared_floats) buffer[tid] = base + tid < n ? x[base + tid] : 0.0f;
  if (overrun && tid == 0) buffer[shared_floats] = 1.0f;
  __syncthreads();
  const int count = min(static_cast<int>(blockDim.x), n - base);
  if (tid < count) out[base + tid] = buffer[count - 1 - tid];
}

__global__ void count_kernel(unsigned* counter, int* max) {
  atomicAdd(counter, 1u);
  atomicMax(max, static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x));
}

__global__ void fill_kernel(float* x, int n, float value, bool one_past_end) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (one_past_end ? i <= n : i < n) x[i] = value;
}

__global__ void scale_kernel(const float* x, float* out, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = a * x[i];
}

// The address of a local escapes through `slots`: under AddressSanitizer's
// detect_stack_use_after_return the local lives in a fake frame, poisoned once the function returns.
#if defined(__CUDACC__)
#define EMBER_TEST_NOINLINE __noinline__
#else  // the emulator's host compiler, whose headers use __noinline__ as an attribute name
#define EMBER_TEST_NOINLINE __attribute__((noinline))
#endif
__device__ EMBER_TEST_NOINLINE void escape_local(int** slots, int value) {
  int local[2] = {value, value + 1};
  slots[threadIdx.x] = local;
}

__global__ void read_after_return_kernel(int** slots, int* out) {
  escape_local(slots, static_cast<int>(threadIdx.x));
  out[threadIdx.x] = slots[threadIdx.x][1];
}

__global__ void wait_kernel(const volatile int* flag) {
  while (*flag == 0) {
  }
}

__global__ void hold_kernel(volatile int* running, const volatile int* release) {
  *running = 1;
  while (*release == 0) {
  }
}

__global__ void warp_kernel(const int* in, int* out, int width) {
  const int lane = threadIdx.x % 32;
  const int v = in[threadIdx.x];
  int* o = out + threadIdx.x * 8;
  o[0] = __shfl_sync(0xffffffffu, v, 3, width);         // lane 3 of each width-segment
  o[1] = __shfl_sync(0xffffffffu, v, lane + 5, width);  // srcLane beyond the width wraps in the segment
  o[2] = __shfl_up_sync(0xffffffffu, v, 2, width);
  o[3] = __shfl_down_sync(0xffffffffu, v, 3, width);
  o[4] = __shfl_xor_sync(0xffffffffu, v, 9, width);
  o[5] = static_cast<int>(__ballot_sync(0xffffffffu, v % 3 == 0));
  o[6] = __any_sync(0xffffffffu, v == 40);
  o[7] = __all_sync(0xffffffffu, v >= 0);
}

// The line numbers below are counted from __LINE__: no formatter may move these lines.
// clang-format off
constexpr int kTreeStepLine = __LINE__ + 8;
__global__ void tree_reduce_kernel(const float* x, float* out, bool with_barrier) {
  __shared__ float partial[1024];
  const int tid = threadIdx.x;
  partial[tid] = x[blockIdx.x * blockDim.x + tid];
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    // The step (kTreeStepLine):
    if (tid < stride) partial[tid] += partial[tid + stride];
    if (with_barrier) __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = partial[0];
}

// Every store and load of shared_access_kernel's words, each on a line of its own for the reports.
constexpr int kStoreLine = __LINE__ + 2;
__device__ __forceinline__ void store_shared(int* word, int value) {
  *word = value;
}
constexpr int kLoadLine = __LINE__ + 2;
__device__ __forceinline__ int load_shared(const int* word) {
  return *word;
}
// clang-format on

__global__ void shared_access_kernel(SharedAccess pattern, int* out) {
  __shared__ int word;
  __shared__ int per_warp[32];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  switch (pattern) {
    case SharedAccess::WriteWrite:
      store_shared(&word, tid);
      __syncthreads();
      out[tid] = load_shared(&word);
      break;
    case SharedAccess::ReadWrite:
    case SharedAccess::ReadAfterBarrier:
      if (tid == 0) store_shared(&word, 7);
      if (pattern == SharedAccess::ReadAfterBarrier) __syncthreads();
      out[tid] = load_shared(&word);
      break;
    case SharedAccess::WarpSynchronous:
    case SharedAccess::WarpUnsynchronised: {
      const bool sync = pattern == SharedAccess::WarpSynchronous;
      if (lane == 0) store_shared(&per_warp[warp], warp + 1);
      if (sync) __syncwarp();
      out[tid] = load_shared(&per_warp[warp]);
      if (sync) __syncwarp();
      if (lane == 31) store_shared(&per_warp[warp], 0);
      break;
    }
    case SharedAccess::Atomic:
      if (tid == 0) store_shared(&word, 0);
      __syncthreads();
      atomicAdd(&word, 1);
      __syncthreads();
      out[tid] = tid == 0 ? load_shared(&word) : 0;
      break;
  }
}

__global__ void missing_lanes_kernel(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

}  // namespace

cudaError_t block_reduce_sum(const float* x, int n, float* out, int blocks, int threads, cudaStream_t stream) {
  EMBER_LAUNCH(block_reduce_sum_kernel, blocks, threads, 0, stream, x, n, out);
  return cudaGetLastError();
}

cudaError_t shift_in_block(const float* in, float* out, int n, int threads, bool with_barrier, cudaStream_t stream) {
  EMBER_LAUNCH(shift_kernel, (n + threads - 1) / threads, threads, 0, stream, in, out, n, with_barrier);
  return cudaGetLastError();
}

cudaError_t divergent_barrier(int threads, int arrive, bool other_site, cudaStream_t stream) {
  EMBER_LAUNCH(divergent_kernel, 2, threads, 0, stream, arrive, other_site);
  return cudaGetLastError();
}

cudaError_t reverse_chunks(const float* x, float* out, int n, int threads, int shared_floats, bool overrun,
                           cudaStream_t stream) {
  EMBER_LAUNCH(reverse_kernel, (n + threads - 1) / threads, threads, shared_floats * sizeof(float), stream, x, out, n,
               shared_floats, overrun);
  return cudaGetLastError();
}

cudaError_t count_threads(unsigned* counter, int* max, int blocks, int threads, cudaStream_t stream) {
  EMBER_LAUNCH(count_kernel, blocks, threads, 0, stream, counter, max);
  return cudaGetLastError();
}

cudaError_t fill(float* x, int n, float value, bool one_past_end, cudaStream_t stream) {
  EMBER_LAUNCH(fill_kernel, n / 256 + 1, 256, 0, stream, x, n, value, one_past_end);
  return cudaGetLastError();
}

cudaError_t scale(const float* x, float* out, float a, int n, cudaStream_t stream) {
  EMBER_LAUNCH(scale_kernel, (n + 255) / 256, 256, 0, stream, x, out, a, n);
  return cudaGetLastError();
}

cudaError_t read_after_return(int** slots, int* out, int threads, cudaStream_t stream) {
  EMBER_LAUNCH(read_after_return_kernel, 1, threads, 0, stream, slots, out);
  return cudaGetLastError();
}

cudaError_t wait_for_host_flag(const volatile int* flag, cudaStream_t stream) {
  EMBER_LAUNCH(wait_kernel, 1, 1, 0, stream, flag);
  return cudaGetLastError();
}

cudaError_t hold_device(volatile int* running, const volatile int* release, cudaStream_t stream) {
  EMBER_LAUNCH(hold_kernel, 1, 1, 0, stream, running, release);
  return cudaGetLastError();
}

cudaError_t warp_operations(const int* in, int* out, int width, cudaStream_t stream) {
  EMBER_LAUNCH(warp_kernel, 1, 64, 0, stream, in, out, width);
  return cudaGetLastError();
}

cudaError_t tree_reduce(const float* x, float* out, int blocks, int threads, bool with_barrier, cudaStream_t stream) {
  EMBER_LAUNCH(tree_reduce_kernel, blocks, threads, 0, stream, x, out, with_barrier);
  return cudaGetLastError();
}

int tree_reduce_step_line() { return kTreeStepLine; }

cudaError_t shared_access(SharedAccess pattern, int* out, int threads, cudaStream_t stream) {
  EMBER_LAUNCH(shared_access_kernel, 1, threads, 0, stream, pattern, out);
  return cudaGetLastError();
}

int shared_store_line() { return kStoreLine; }
int shared_load_line() { return kLoadLine; }

cudaError_t shuffle_with_missing_lanes(int* out, cudaStream_t stream) {
  EMBER_LAUNCH(missing_lanes_kernel, 1, 32, 0, stream, out);
  return cudaGetLastError();
}

}  // namespace ember::testing
