// Softmax and log-softmax kernels: the input, made contiguous, is [outer, size, inner] with the
// softmax along `size`; a row is the `size` values of one (outer, inner) pair, `inner` apart.
// Rows reduce twice (max, then the sum of exponentials; the backward once) and are written in a
// third pass. When rows are contiguous (inner == 1), a warp takes a row, or a whole block when the
// row is long; otherwise a thread takes a row, so that neighbouring threads read neighbouring
// columns, unless there are too few rows for that and each is long. Sums merge in a fixed order
// and reach every thread from one place, so all elements of a row see the same bits.
// The formulas are core/softmax_math.h's, as on the CPU.
#include <algorithm>
#include <limits>

#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/softmax_math.h"
#include "cuda/kernels/loops.cuh"
#include "cuda/kernels/entries.h"

namespace ember::cuda {

namespace {

constexpr unsigned kFullWarp = 0xffffffffu;
constexpr int kWarps = kBlockThreads / 32;
// A row longer than this gets a block of its own; and column-wise rows are taken a row per block
// only when there are fewer than kManyRows of them.
constexpr int64_t kLongRow = 1024;
constexpr int64_t kManyRows = 16384;

DType compute_dtype(DType d) { return d == kFloat64 ? kFloat64 : kFloat32; }

struct Rows {
  int64_t outer = 1, size = 1, inner = 1;
  __host__ __device__ int64_t count() const { return outer * inner; }
  // Element 0 of row r; element k lies k * inner further on.
  __device__ __forceinline__ int64_t base(int64_t r) const { return (r / inner) * size * inner + r % inner; }
};

Rows rows_of(const Tensor& t, int64_t dim) {
  Rows rows;
  for (int64_t d = 0; d < dim; ++d) rows.outer *= t.size(d);
  rows.size = t.dim() == 0 ? 1 : t.size(dim);
  for (int64_t d = dim + 1; d < t.dim(); ++d) rows.inner *= t.size(d);
  return rows;
}

// Combines one value per thread of a group of kGroup threads (a warp, or the whole block) in a
// fixed order and returns the result to every thread of the group. `scratch` holds a block's
// warp results (unused by warp groups).
template <int kGroup, typename V, class Merge>
__device__ __forceinline__ V group_reduce(V v, const Merge& merge, V* scratch) {
  for (int delta = 16; delta > 0; delta /= 2) v = merge(v, __shfl_down_sync(kFullWarp, v, delta));
  v = __shfl_sync(kFullWarp, v, 0);
  if constexpr (kGroup > 32) {
    const int warp = static_cast<int>(threadIdx.x) / 32;
    if (threadIdx.x % 32 == 0) scratch[warp] = v;
    __syncthreads();
    v = scratch[0];
    for (int w = 1; w < kGroup / 32; ++w) v = merge(v, scratch[w]);
    __syncthreads();  // scratch is written again by the next reduction
  }
  return v;
}

template <typename C>
struct MaxOf {
  __device__ C operator()(C a, C b) const { return formula::softmax_max(a, b); }
};
struct SumOf {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// A share of one row: elements first, first + step, ... below `size`, each `inner` apart.
struct RowShare {
  int64_t size, inner, first, step;
};

template <typename T>
__device__ __forceinline__ ComputeType<T> share_max(const T* in, const RowShare& s) {
  using C = ComputeType<T>;
  C max = -std::numeric_limits<C>::infinity();
  for (int64_t k = s.first; k < s.size; k += s.step) max = formula::softmax_max(max, static_cast<C>(in[k * s.inner]));
  return max;
}

template <typename T>
__device__ __forceinline__ double share_total(const T* in, const RowShare& s, ComputeType<T> shift) {
  double total = 0;
  for (int64_t k = s.first; k < s.size; k += s.step)
    total += formula::softmax_term(static_cast<ComputeType<T>>(in[k * s.inner]), shift);
  return total;
}

template <typename T>
__device__ __forceinline__ void write_share(const T* in, T* out, const RowShare& s, ComputeType<T> shift, double total,
                                            bool log) {
  using C = ComputeType<T>;
  if (log) {
    const C log_total = static_cast<C>(formula::libm::log(total));
    for (int64_t k = s.first; k < s.size; k += s.step)
      out[k * s.inner] = static_cast<T>(formula::log_softmax_output(static_cast<C>(in[k * s.inner]), shift, log_total));
  } else {
    const double inverse_total = 1.0 / total;
    for (int64_t k = s.first; k < s.size; k += s.step)
      out[k * s.inner] = static_cast<T>(formula::softmax_output(static_cast<C>(in[k * s.inner]), shift, inverse_total));
  }
}

template <typename T>
__device__ __forceinline__ double share_backward_sum(const T* g, const T* y, const RowShare& s, bool log) {
  using C = ComputeType<T>;
  double sum = 0;
  for (int64_t k = s.first; k < s.size; k += s.step)
    sum += formula::softmax_backward_term(static_cast<C>(g[k * s.inner]), static_cast<C>(y[k * s.inner]), log);
  return sum;
}

template <typename T>
__device__ __forceinline__ void write_backward_share(const T* g, const T* y, T* dx, const RowShare& s, double sum,
                                                     bool log) {
  using C = ComputeType<T>;
  for (int64_t k = s.first; k < s.size; k += s.step) {
    const int64_t j = k * s.inner;
    dx[j] = static_cast<T>(formula::softmax_backward_element(static_cast<C>(g[j]), static_cast<C>(y[j]), sum, log));
  }
}

// Rows of contiguous or strided values, kGroup threads per row (32 or kBlockThreads).
template <typename T, int kGroup>
__global__ void __launch_bounds__(kBlockThreads) softmax_rows_kernel(const Rows rows, const T* x, T* y, bool log) {
  using C = ComputeType<T>;
  __shared__ C max_scratch[kWarps];
  __shared__ double sum_scratch[kWarps];
  constexpr int kRowsPerBlock = kBlockThreads / kGroup;
  const RowShare share{rows.size, rows.inner, threadIdx.x % kGroup, kGroup};
  const int64_t step = static_cast<int64_t>(gridDim.x) * kRowsPerBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kGroup; r < rows.count();
       r += step) {
    const int64_t base = rows.base(r);
    const C shift = formula::softmax_shift(group_reduce<kGroup>(share_max(x + base, share), MaxOf<C>{}, max_scratch));
    const double total = group_reduce<kGroup>(share_total(x + base, share, shift), SumOf{}, sum_scratch);
    write_share(x + base, y + base, share, shift, total, log);
  }
}

// A thread per row: neighbouring threads take neighbouring columns (inner > 1), so each of the
// row's passes reads coalesced memory.
template <typename T>
__global__ void __launch_bounds__(kBlockThreads) softmax_columns_kernel(const Rows rows, const T* x, T* y, bool log) {
  const RowShare share{rows.size, rows.inner, 0, 1};
  for (const int64_t r : grid_stride(rows.count())) {
    const int64_t base = rows.base(r);
    const ComputeType<T> shift = formula::softmax_shift(share_max(x + base, share));
    write_share(x + base, y + base, share, shift, share_total(x + base, share, shift), log);
  }
}

template <typename T, int kGroup>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_backward_rows_kernel(const Rows rows, const T* g, const T* y, T* dx, bool log) {
  __shared__ double sum_scratch[kWarps];
  constexpr int kRowsPerBlock = kBlockThreads / kGroup;
  const RowShare share{rows.size, rows.inner, threadIdx.x % kGroup, kGroup};
  const int64_t step = static_cast<int64_t>(gridDim.x) * kRowsPerBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kGroup; r < rows.count();
       r += step) {
    const int64_t base = rows.base(r);
    const double sum = group_reduce<kGroup>(share_backward_sum(g + base, y + base, share, log), SumOf{}, sum_scratch);
    write_backward_share(g + base, y + base, dx + base, share, sum, log);
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    softmax_backward_columns_kernel(const Rows rows, const T* g, const T* y, T* dx, bool log) {
  const RowShare share{rows.size, rows.inner, 0, 1};
  for (const int64_t r : grid_stride(rows.count())) {
    const int64_t base = rows.base(r);
    write_backward_share(g + base, y + base, dx + base, share, share_backward_sum(g + base, y + base, share, log), log);
  }
}

enum class Strategy { WarpPerRow, BlockPerRow, ThreadPerRow };

Strategy strategy_for(const Rows& rows) {
  if (rows.inner == 1) return rows.size > kLongRow ? Strategy::BlockPerRow : Strategy::WarpPerRow;
  return rows.size > kLongRow && rows.count() < kManyRows ? Strategy::BlockPerRow : Strategy::ThreadPerRow;
}

unsigned grid_for_rows(int64_t rows, int64_t rows_per_block) {
  return static_cast<unsigned>(std::clamp<int64_t>((rows + rows_per_block - 1) / rows_per_block, 1, 65535));
}

// Launches the kernel that strategy_for picks: a warp per row, a block per row or a thread per row.
template <auto kWarpRows, auto kBlockRows, auto kColumns, typename... Args>
void launch_rows(const Rows& rows, Device device, const char* name, Args... args) {
  DeviceGuard guard(device.index);
  cudaStream_t stream = current_stream().handle();
  switch (strategy_for(rows)) {
    case Strategy::WarpPerRow:
      EMBER_LAUNCH(kWarpRows, dim3(grid_for_rows(rows.count(), kBlockThreads / 32)), dim3(kBlockThreads), 0, stream,
                   rows, args...);
      break;
    case Strategy::BlockPerRow:
      EMBER_LAUNCH(kBlockRows, dim3(grid_for_rows(rows.count(), 1)), dim3(kBlockThreads), 0, stream, rows, args...);
      break;
    case Strategy::ThreadPerRow:
      EMBER_LAUNCH(kColumns, dim3(grid_for(rows.count())), dim3(kBlockThreads), 0, stream, rows, args...);
      break;
  }
  check_launch(name);
}

}  // namespace

Tensor softmax_kernel(const Tensor& input, int64_t dim, bool log) {
  NoGradGuard no_grad;
  const char* name = log ? "log_softmax" : "softmax";
  const Tensor x = input.contiguous();
  Tensor y = empty(x.sizes(), TensorOptions(x.dtype()).device(x.device()));
  if (x.numel() == 0) return y;
  const Rows rows = rows_of(x, dim);
  EMBER_DISPATCH_FLOATING(x.dtype(), name, [&] {
    using T = scalar_t;
    launch_rows<&softmax_rows_kernel<T, 32>, &softmax_rows_kernel<T, kBlockThreads>, &softmax_columns_kernel<T>>(
        rows, x.device(), name, x.data_ptr<T>(), y.data_ptr<T>(), log);
  });
  return y;
}

Tensor softmax_backward_kernel(const Tensor& grad_output, const Tensor& output, int64_t dim, bool log) {
  NoGradGuard no_grad;
  const char* name = log ? "log_softmax backward" : "softmax backward";
  EMBER_CHECK(grad_output.sizes() == output.sizes(), name, ": expected a gradient of shape ", shape_str(output.sizes()),
              ", got ", shape_str(grad_output.sizes()));
  // Mixed dtypes meet in the output's compute dtype, as on the CPU.
  const DType dtype = grad_output.dtype() == output.dtype() ? output.dtype() : compute_dtype(output.dtype());
  const Tensor g = grad_output.to(dtype).contiguous(), y = output.to(dtype).contiguous();
  Tensor dx = empty(y.sizes(), TensorOptions(dtype).device(y.device()));
  if (y.numel() > 0) {
    const Rows rows = rows_of(y, dim);
    EMBER_DISPATCH_FLOATING(dtype, name, [&] {
      using T = scalar_t;
      launch_rows<&softmax_backward_rows_kernel<T, 32>, &softmax_backward_rows_kernel<T, kBlockThreads>,
                  &softmax_backward_columns_kernel<T>>(rows, y.device(), name, g.data_ptr<T>(), y.data_ptr<T>(),
                                                       dx.data_ptr<T>(), log);
    });
  }
  return dx.to(grad_output.dtype());
}

}  // namespace ember::cuda
