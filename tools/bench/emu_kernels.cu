// The kernels of tools/bench/emu_kernels.h.
#include "tools/bench/emu_kernels.h"

namespace ember::bench {

namespace {

__global__ void barrier_kernel(float* out, int barriers) {
  __shared__ float s[1024];
  float v = threadIdx.x;
  for (int k = 0; k < barriers; ++k) {
    s[threadIdx.x] = v;
    __syncthreads();
    v += s[(threadIdx.x + 1) % blockDim.x];
    __syncthreads();
  }
  out[threadIdx.x] = v;
}

// One pass, no grid-stride loop: a grid-stride loop runs thread by thread in the emulator,
// striding through memory where a GPU's warps move together (5x slower here, no gain on a GPU).
// 16 contiguous elements per thread: the emulator spends ~4 ns per thread, so 4 per thread (as in
// PyTorch's basic elementwise kernel) ran at 0.10-0.21 of the CPU backend's bandwidth, 16 at
// 0.42. On a GPU the warp's accesses are 64 B apart per instruction and meet again in L1; the
// bandwidth of that choice on a real GPU is still to be measured (docs/BENCHMARKS.md).
constexpr int kPerThread = 16;

__global__ void add_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int64_t n) {
  const int64_t i = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * kPerThread;
  if (i + kPerThread <= n) {
    for (int k = 0; k < kPerThread; ++k) c[i + k] = a[i + k] + b[i + k];
  } else {
    for (int64_t k = i; k < n; ++k) c[k] = a[k] + b[k];
  }
}

constexpr int kTile = 16;

__global__ void gemm_kernel(const float* a, const float* b, float* c, int n) {
  __shared__ float ta[kTile][kTile + 1];
  __shared__ float tb[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0;
  for (int k0 = 0; k0 < n; k0 += kTile) {
    ta[threadIdx.y][threadIdx.x] = row < n && k0 + threadIdx.x < n ? a[row * n + k0 + threadIdx.x] : 0.0f;
    tb[threadIdx.y][threadIdx.x] = col < n && k0 + threadIdx.y < n ? b[(k0 + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    __syncthreads();
  }
  if (row < n && col < n) c[row * n + col] = acc;
}

}  // namespace

void barrier_loop(float* out, int threads, int barriers, cudaStream_t stream) {
  EMBER_LAUNCH(barrier_kernel, 1, threads, 0, stream, out, barriers);
}

__global__ void nothing_kernel(int) {}

void empty_kernel(cudaStream_t stream) { EMBER_LAUNCH(nothing_kernel, 1, 1, 0, stream, 0); }

void add_floats(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  const int64_t blocks = std::max<int64_t>((n + threads * kPerThread - 1) / (threads * kPerThread), 1);
  EMBER_LAUNCH(add_kernel, static_cast<unsigned>(blocks), threads, 0, stream, a, b, c, n);
}

void tiled_gemm(const float* a, const float* b, float* c, int n, cudaStream_t stream) {
  const unsigned tiles = static_cast<unsigned>((n + kTile - 1) / kTile);
  EMBER_LAUNCH(gemm_kernel, dim3(tiles, tiles), dim3(kTile, kTile), 0, stream, a, b, c, n);
}

}  // namespace ember::bench
