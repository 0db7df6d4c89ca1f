// Copy and fill kernels. A same-dtype copy of contiguous, 16-byte aligned memory moves 16 bytes
// per thread step (one 128-bit load and store on a GPU, four times fewer than 4-byte elements);
// other same-dtype copies move raw words of the element's size; a cast reads the source dtype
// (chosen at run time, so one kernel per destination type) and converts with formula::cast, as
// the CPU does.
#include "core/elementwise_math.h"
#include "cuda/kernels/entries.h"
#include "cuda/kernels/loops.cuh"

namespace ember::cuda {

namespace {

template <typename Word>
struct MoveWords {
  __device__ void operator()(char* const* data, const int64_t* off) const {
    *reinterpret_cast<Word*>(data[0] + off[0]) = *reinterpret_cast<const Word*>(data[1] + off[1]);
  }
};

struct alignas(16) Chunk {
  uint64_t low, high;
};

// Bytes [0, bytes) of src to dst, both 16-byte aligned: whole chunks, then the tail byte by byte.
__global__ void __launch_bounds__(kBlockThreads)
    copy_contiguous_kernel(char* __restrict__ dst, const char* __restrict__ src, int64_t bytes) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t chunks = bytes / static_cast<int64_t>(sizeof(Chunk));
  for (int64_t i = first; i < chunks; i += step)
    reinterpret_cast<Chunk*>(dst)[i] = reinterpret_cast<const Chunk*>(src)[i];
  for (int64_t i = chunks * static_cast<int64_t>(sizeof(Chunk)) + first; i < bytes; i += step) dst[i] = src[i];
}

bool contiguous_and_aligned(const StridedLoop& loop, int64_t element) {
  if (loop.host_scalars != 0 || loop.ndim != 1) return false;  // coalesced: contiguous is one dim
  if (loop.strides[0][0] != element || loop.strides[1][0] != element) return false;
  return reinterpret_cast<uintptr_t>(loop.data[0]) % alignof(Chunk) == 0 &&
         reinterpret_cast<uintptr_t>(loop.data[1]) % alignof(Chunk) == 0;
}

void copy_contiguous(const StridedLoop& loop, int64_t element) {
  DeviceGuard guard(loop.device.index);
  const int64_t bytes = loop.numel * element;
  const int64_t per_block = kBlockThreads * static_cast<int64_t>(sizeof(Chunk)) * 4;
  const unsigned blocks = static_cast<unsigned>(std::clamp<int64_t>((bytes + per_block - 1) / per_block, 1, 4096));
  EMBER_LAUNCH(copy_contiguous_kernel, dim3(blocks), dim3(kBlockThreads), 0, current_stream().handle(), loop.data[0],
               static_cast<const char*>(loop.data[1]), bytes);
  check_launch("copy_");
}

template <typename D>
struct CastTo {
  DType source;
  __device__ void operator()(char* const* data, const int64_t* off) const {
    const char* in = data[1] + off[1];
    D value{};
    switch (source) {
      case kFloat32:
        value = formula::cast<D>(*reinterpret_cast<const float*>(in));
        break;
      case kFloat64:
        value = formula::cast<D>(*reinterpret_cast<const double*>(in));
        break;
      case kBFloat16:
        value = formula::cast<D>(*reinterpret_cast<const BFloat16*>(in));
        break;
      case kFloat16:
        value = formula::cast<D>(*reinterpret_cast<const Half*>(in));
        break;
      case kInt64:
        value = formula::cast<D>(*reinterpret_cast<const int64_t*>(in));
        break;
      case kInt32:
        value = formula::cast<D>(*reinterpret_cast<const int32_t*>(in));
        break;
      case kUInt8:
        value = formula::cast<D>(*reinterpret_cast<const uint8_t*>(in));
        break;
      case kBool:
        value = formula::cast<D>(*reinterpret_cast<const bool*>(in));
        break;
    }
    *reinterpret_cast<D*>(data[0] + off[0]) = value;
  }
};

template <typename T>
struct Fill {
  T value;
  __device__ void operator()(char* const* data, const int64_t* off) const {
    *reinterpret_cast<T*>(data[0] + off[0]) = value;
  }
};

}  // namespace

void copy_kernel(const StridedLoop& loop) {
  if (loop.dtypes[0] == loop.dtypes[1]) {
    if (loop.numel == 0) return;
    const int64_t element = static_cast<int64_t>(element_size(loop.dtypes[0]));
    if (contiguous_and_aligned(loop, element)) return copy_contiguous(loop, element);
    switch (element) {
      case 1:
        return launch_elementwise<2>(loop, MoveWords<uint8_t>{}, "copy_");
      case 2:
        return launch_elementwise<2>(loop, MoveWords<uint16_t>{}, "copy_");
      case 4:
        return launch_elementwise<2>(loop, MoveWords<uint32_t>{}, "copy_");
      default:
        return launch_elementwise<2>(loop, MoveWords<uint64_t>{}, "copy_");
    }
  }
  EMBER_DISPATCH_ALL(loop.dtypes[0], "copy_",
                     [&] { launch_elementwise<2>(loop, CastTo<scalar_t>{loop.dtypes[1]}, "copy_"); });
}

void fill_kernel(const StridedLoop& loop, Scalar value) {
  EMBER_DISPATCH_ALL(loop.dtypes[0], "fill_",
                     [&] { launch_elementwise<1>(loop, Fill<scalar_t>{value.to<scalar_t>()}, "fill_"); });
}

}  // namespace ember::cuda
