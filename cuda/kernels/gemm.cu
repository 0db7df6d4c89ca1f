// A block computes a 64 x 64 tile of C from 16-deep slices of op(A) and op(B) staged in shared
// memory (widened to the accumulator type once, at the load), and each of its 256 threads keeps a
// 4 x 4 sub-tile in registers: 16 multiply-adds per 8 shared-memory reads, and two barriers per
// slice, which also keeps the emulator's per-barrier cost small next to the arithmetic.
#include <algorithm>
#include <type_traits>

#include "core/elementwise_math.h"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/loops.cuh"

namespace ember::cuda {

namespace {

constexpr int kTileM = 64, kTileN = 64, kTileK = 16;
constexpr int kThreads = 256;                       // 16 x 16 threads, each 4 x 4 outputs
constexpr int kLoads = kTileM * kTileK / kThreads;  // elements of each operand a thread stages per slice
static_assert(kTileM * kTileK == kTileN * kTileK, "A and B slices are staged with the same loop");

// Thread t covers rows ty + 16 i and columns tx + 16 j: a warp's stores to C are coalesced, and
// its shared-memory reads are broadcasts or touch distinct banks.
// C is of type Out: T, or float for 16-bit T when the caller's sums go on in float32.
template <typename T, typename Acc, typename Out>
__global__ void __launch_bounds__(kThreads) gemm_tile_kernel(const __grid_constant__ GemmArgs s) {
  const T* a = static_cast<const T*>(s.a);
  const T* b = static_cast<const T*>(s.b);
  Out* c = static_cast<Out*>(s.c);
  __shared__ Acc tile_a[kTileK][kTileM];
  __shared__ Acc tile_b[kTileK][kTileN];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTileM, col0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  for (int64_t batch = blockIdx.z; batch < s.batch; batch += gridDim.z) {
    const T* a_mat = a + batch * s.stride_a;
    const T* b_mat = b + batch * s.stride_b;
    Out* c_mat = c + batch * s.stride_c;
    Acc acc[4][4];
    EMBER_UNROLL
    for (int i = 0; i < 4; ++i) {
      EMBER_UNROLL
      for (int j = 0; j < 4; ++j) acc[i][j] = Acc(0);
    }
    for (int64_t k0 = 0; k0 < s.k; k0 += kTileK) {
      // Consecutive threads read consecutive addresses of whichever dim is contiguous in memory.
      EMBER_UNROLL
      for (int l = 0; l < kLoads; ++l) {
        const int idx = tid + kThreads * l;
        const int kk = s.trans_a ? idx / kTileM : idx % kTileK;
        const int mm = s.trans_a ? idx % kTileM : idx / kTileK;
        const int64_t row = row0 + mm, depth = k0 + kk;
        Acc v = Acc(0);
        if (row < s.m && depth < s.k)
          v = static_cast<Acc>(
              static_cast<ComputeType<T>>(s.trans_a ? a_mat[depth * s.lda + row] : a_mat[row * s.lda + depth]));
        tile_a[kk][mm] = v;
      }
      EMBER_UNROLL
      for (int l = 0; l < kLoads; ++l) {
        const int idx = tid + kThreads * l;
        const int kk = s.trans_b ? idx % kTileK : idx / kTileN;
        const int nn = s.trans_b ? idx / kTileK : idx % kTileN;
        const int64_t col = col0 + nn, depth = k0 + kk;
        Acc v = Acc(0);
        if (col < s.n && depth < s.k)
          v = static_cast<Acc>(
              static_cast<ComputeType<T>>(s.trans_b ? b_mat[col * s.ldb + depth] : b_mat[depth * s.ldb + col]));
        tile_b[kk][nn] = v;
      }
      __syncthreads();
      EMBER_UNROLL
      for (int kk = 0; kk < kTileK; ++kk) {
        Acc av[4], bv[4];
        EMBER_UNROLL
        for (int i = 0; i < 4; ++i) av[i] = tile_a[kk][ty + 16 * i];
        EMBER_UNROLL
        for (int j = 0; j < 4; ++j) bv[j] = tile_b[kk][tx + 16 * j];
        EMBER_UNROLL
        for (int i = 0; i < 4; ++i) {
          EMBER_UNROLL
          for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
        }
      }
      __syncthreads();  // the next slice overwrites the tiles
    }
    const Acc alpha = static_cast<Acc>(s.alpha), beta = static_cast<Acc>(s.beta);
    EMBER_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int64_t row = row0 + ty + 16 * i;
      if (row >= s.m) continue;
      EMBER_UNROLL
      for (int j = 0; j < 4; ++j) {
        const int64_t col = col0 + tx + 16 * j;
        if (col >= s.n) continue;
        Out* out = c_mat + row * s.ldc + col;
        Acc value = alpha * acc[i][j];
        // beta == 0 never reads C: it may hold NaN or uninitialised memory (BLAS's rule).
        if (s.beta != 0.0) value += beta * static_cast<Acc>(static_cast<ComputeType<Out>>(*out));
        *out = static_cast<Out>(static_cast<ComputeType<Out>>(value));
      }
    }
  }
}

template <typename T, typename Acc, typename Out = T>
void launch_gemm(const GemmArgs& g) {
  const dim3 grid(static_cast<unsigned>((g.n + kTileN - 1) / kTileN),
                  static_cast<unsigned>((g.m + kTileM - 1) / kTileM),
                  static_cast<unsigned>(std::min<int64_t>(g.batch, 65535)));
  constexpr auto kernel = &gemm_tile_kernel<T, Acc, Out>;
  EMBER_LAUNCH(kernel, grid, dim3(kThreads), 0, current_stream().handle(), g);
  check_launch("matmul");
}

}  // namespace

namespace {

void check_grid(const GemmArgs& g) {
  EMBER_CHECK((g.n + kTileN - 1) / kTileN <= 0x7fffffff && (g.m + kTileM - 1) / kTileM <= 65535, "matmul: ", g.m, " x ",
              g.n, " is more than a CUDA grid of 64 x 64 tiles holds (at most 65535 x 2^31 - 1)");
}

}  // namespace

void ember_gemm_float32_output(const GemmArgs& g) {
  check_grid(g);
  DeviceGuard guard(g.device.index);
  switch (g.dtype) {
    case kBFloat16:
      return launch_gemm<BFloat16, float, float>(g);
    case kFloat16:
      return launch_gemm<Half, float, float>(g);
    default:
      EMBER_FAIL("matmul: a float32 output is for bfloat16 and float16 operands, got ", dtype_name(g.dtype));
  }
}

void ember_gemm(const GemmArgs& g) {
  check_grid(g);
  DeviceGuard guard(g.device.index);
  switch (g.dtype) {
    case kFloat32:
      return launch_gemm<float, float>(g);
    case kFloat64:
      return launch_gemm<double, double>(g);
    case kBFloat16:
      return launch_gemm<BFloat16, float>(g);
    case kFloat16:
      return launch_gemm<Half, float>(g);
    default:
      detail::unsupported_dtype("matmul", g.dtype);
  }
}

}  // namespace ember::cuda
