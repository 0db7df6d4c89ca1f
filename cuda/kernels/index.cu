// gather and scatter_add kernels, a thread per index element. Operands keep their strides (an
// embedding table is never copied); gather moves raw words of the element's size, scatter_add
// adds atomically because index entries may name the same destination, so the order in which
// duplicates add up (and a float sum's rounding) varies from run to run.
//
// Out-of-range indices: the CPU kernels raise from the call itself, naming the first bad index in
// row-major order. A kernel cannot raise, and waiting for its verdict after each call would cost
// a host round trip per training step (cross_entropy's gather). So a kernel skips a bad index
// (writing nothing for it) and sets a deferred check's flag (cuda/deferred_check.h); the host
// raises the CPU's error, found by scanning a copy of the index, at its next synchronisation.
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/factory.h"
#include "cuda/deferred_check.h"
#include "cuda/kernels/entries.h"
#include "cuda/kernels/loops.cuh"

namespace ember::cuda {

namespace {

// The operands, in element strides over the index's shape (innermost first, size-1 dims
// dropped). The indexed tensor (gather's input, scatter_add's out) has stride 0 along `dim`:
// there the index value picks the element, dim_stride apart.
enum Operand { kIndexed, kOther, kIndex };

struct IndexLoop {
  int ndim;
  int64_t numel;
  int64_t dim_size, dim_stride;
  int64_t sizes[kMaxLoopDims];
  int64_t strides[3][kMaxLoopDims];

  __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[3]) const {
    off[0] = off[1] = off[2] = 0;
    for (int d = 0; d < ndim; ++d) {
      const int64_t at = i % sizes[d];
      i /= sizes[d];
      EMBER_UNROLL
      for (int k = 0; k < 3; ++k) off[k] += at * strides[k][d];
    }
  }
};

IndexLoop index_loop(const Tensor& indexed, const Tensor& other, const Tensor& index, int64_t dim, const char* op) {
  IndexLoop loop{};
  loop.numel = index.numel();
  loop.dim_size = indexed.size(dim);
  loop.dim_stride = indexed.stride(dim);
  for (int64_t d = index.dim() - 1; d >= 0; --d) {
    if (index.size(d) == 1) continue;
    EMBER_CHECK(loop.ndim < kMaxLoopDims, op, ": the CUDA kernel takes at most ", kMaxLoopDims,
                " dims of size > 1, got index ", shape_str(index.sizes()));
    loop.sizes[loop.ndim] = index.size(d);
    loop.strides[kIndexed][loop.ndim] = d == dim ? 0 : indexed.stride(d);
    loop.strides[kOther][loop.ndim] = other.stride(d);
    loop.strides[kIndex][loop.ndim] = index.stride(d);
    ++loop.ndim;
  }
  return loop;
}

// Calls visit(off, at) for each index element in range, `at` being the indexed tensor's element
// it names; an element out of range is skipped and sets the deferred check's flag.
template <typename Visit>
__device__ __forceinline__ void for_each_in_range(const IndexLoop& loop, const int64_t* index, unsigned* bad_index,
                                                  Visit visit) {
  for (const int64_t i : grid_stride(loop.numel)) {
    int64_t off[3];
    loop.offsets(i, off);
    const int64_t j = index[off[kIndex]];
    if (j < 0 || j >= loop.dim_size) {
      *bad_index = 1;
      continue;
    }
    visit(off, off[kIndexed] + j * loop.dim_stride);
  }
}

template <typename Word>
__global__ void __launch_bounds__(kBlockThreads)
    gather_elements(Word* out, const Word* input, const int64_t* index, const __grid_constant__ IndexLoop loop,
                    unsigned* bad_index) {
  for_each_in_range(loop, index, bad_index, [&](const int64_t(&off)[3], int64_t at) { out[off[kOther]] = input[at]; });
}

// The bits of an 8-bit integer or a 16-bit float (ember::BFloat16 and Half keep theirs in `bits`).
template <typename T>
__device__ __forceinline__ T from_bits(unsigned word) {
  if constexpr (sizeof(T) == 1) {
    return static_cast<T>(word & 0xffu);
  } else {
    T value;
    value.bits = static_cast<uint16_t>(word);
    return value;
  }
}

template <typename T>
__device__ __forceinline__ unsigned to_bits(T value) {
  if constexpr (sizeof(T) == 1)
    return value;
  else
    return value.bits;
}

// *address += value, atomically, rounded to T as the CPU rounds each addition. 8- and 16-bit
// types have no atomic add of their own: they swap the aligned 32-bit word holding them, retrying
// until no other thread changed it in between (the first read may be stale; that costs a retry).
template <typename T>
__device__ __forceinline__ void atomic_accumulate(T* address, T value) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t>) {
    atomicAdd(address, value);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    // Two's complement: the unsigned sum has the signed sum's bits.
    atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
  } else {
    static_assert(sizeof(T) < 4, "atomic_accumulate: no atomic for this type");
    using C = ComputeType<T>;
    const uintptr_t at = reinterpret_cast<uintptr_t>(address);
    unsigned* word = reinterpret_cast<unsigned*>(at & ~uintptr_t{3});
    const unsigned shift = static_cast<unsigned>(at & 3u) * 8u;
    constexpr unsigned kMask = sizeof(T) == 1 ? 0xffu : 0xffffu;
    unsigned seen = *static_cast<volatile unsigned*>(word);
    for (;;) {
      const T sum = static_cast<T>(static_cast<C>(from_bits<T>(seen >> shift)) + static_cast<C>(value));
      const unsigned updated = (seen & ~(kMask << shift)) | (to_bits(sum) << shift);
      const unsigned prior = atomicCAS(word, seen, updated);
      if (prior == seen) return;
      seen = prior;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    scatter_add_elements(T* out, const T* src, const int64_t* index, const __grid_constant__ IndexLoop loop,
                         unsigned* bad_index) {
  for_each_in_range(loop, index, bad_index,
                    [&](const int64_t(&off)[3], int64_t at) { atomic_accumulate(out + at, src[off[kOther]]); });
}

// The CPU's error for the first index outside [0, limit) in row-major order, from a host copy.
// The index is the caller's tensor, read after the kernel: if it was overwritten since, the
// message says so rather than naming a value.
std::string first_bad_index(const char* op, const Tensor& index, int64_t dim, int64_t limit) {
  for (const int64_t value : index.cpu().to_vector<int64_t>())
    if (value < 0 || value >= limit)
      return detail::concat(op, ": index ", value, " is out of bounds for dimension ", dim, " with size ", limit);
  return detail::concat(op, ": an index was out of bounds for dimension ", dim, " with size ", limit,
                        " (the index tensor has been overwritten since)");
}

DeferredCheck begin_check(Device device) {
  raise_finished_checks(device.index);
  return DeferredCheck::begin(device.index);
}

void submit_check(DeferredCheck check, const char* op, const Tensor& index, int64_t dim, int64_t limit) {
  std::move(check).submit(current_stream().handle(),
                          [op, index, dim, limit] { return first_bad_index(op, index, dim, limit); });
}

template <typename Word>
void launch_gather(const Tensor& out, const Tensor& input, const Tensor& index, const IndexLoop& loop, unsigned* bad) {
  EMBER_LAUNCH(gather_elements<Word>, dim3(grid_for(loop.numel)), dim3(kBlockThreads), 0, current_stream().handle(),
               static_cast<Word*>(out.data_ptr()), static_cast<const Word*>(input.data_ptr()),
               index.data_ptr<int64_t>(), loop, bad);
}

}  // namespace

void gather_kernel(const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index) {
  if (index.numel() == 0) return;
  DeviceGuard guard(input.device().index);
  const IndexLoop loop = index_loop(input, out, index, dim, "gather");
  DeferredCheck check = begin_check(input.device());
  switch (input.element_size()) {
    case 1:
      launch_gather<uint8_t>(out, input, index, loop, check.flag());
      break;
    case 2:
      launch_gather<uint16_t>(out, input, index, loop, check.flag());
      break;
    case 4:
      launch_gather<uint32_t>(out, input, index, loop, check.flag());
      break;
    default:
      launch_gather<uint64_t>(out, input, index, loop, check.flag());
      break;
  }
  check_launch("gather");
  submit_check(std::move(check), "gather", index, dim, loop.dim_size);
}

void scatter_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  if (index.numel() == 0) return;
  DeviceGuard guard(out.device().index);
  const IndexLoop loop = index_loop(out, src, index, dim, "scatter_add");
  DeferredCheck check = begin_check(out.device());
  EMBER_DISPATCH_NUMERIC(out.dtype(), "scatter_add", [&] {
    EMBER_LAUNCH(scatter_add_elements<scalar_t>, dim3(grid_for(loop.numel)), dim3(kBlockThreads), 0,
                 current_stream().handle(), out.data_ptr<scalar_t>(), src.data_ptr<scalar_t>(),
                 index.data_ptr<int64_t>(), loop, check.flag());
  });
  check_launch("scatter_add");
  submit_check(std::move(check), "scatter_add", index, dim, loop.dim_size);
}

}  // namespace ember::cuda
