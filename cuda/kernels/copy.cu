// Copy and fill kernels. A same-dtype copy moves raw words of the element's size; a cast reads
// the source dtype (chosen at run time, so one kernel per destination type) and converts with
// formula::cast, as the CPU does.
#include "core/elementwise_math.h"
#include "cuda/kernels/copy.cuh"
#include "cuda/kernels/loops.cuh"

namespace ember::cuda {

namespace {

template <typename Word>
struct MoveWords {
  __device__ void operator()(char* const* data, const int64_t* off) const {
    *reinterpret_cast<Word*>(data[0] + off[0]) = *reinterpret_cast<const Word*>(data[1] + off[1]);
  }
};

template <typename D>
struct CastTo {
  DType source;
  __device__ void operator()(char* const* data, const int64_t* off) const {
    const char* in = data[1] + off[1];
    D value{};
    switch (source) {
      case kFloat32: value = formula::cast<D>(*reinterpret_cast<const float*>(in)); break;
      case kFloat64: value = formula::cast<D>(*reinterpret_cast<const double*>(in)); break;
      case kBFloat16: value = formula::cast<D>(*reinterpret_cast<const BFloat16*>(in)); break;
      case kFloat16: value = formula::cast<D>(*reinterpret_cast<const Half*>(in)); break;
      case kInt64: value = formula::cast<D>(*reinterpret_cast<const int64_t*>(in)); break;
      case kInt32: value = formula::cast<D>(*reinterpret_cast<const int32_t*>(in)); break;
      case kUInt8: value = formula::cast<D>(*reinterpret_cast<const uint8_t*>(in)); break;
      case kBool: value = formula::cast<D>(*reinterpret_cast<const bool*>(in)); break;
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
    switch (element_size(loop.dtypes[0])) {
      case 1: return launch_elementwise<2>(loop, MoveWords<uint8_t>{}, "copy_");
      case 2: return launch_elementwise<2>(loop, MoveWords<uint16_t>{}, "copy_");
      case 4: return launch_elementwise<2>(loop, MoveWords<uint32_t>{}, "copy_");
      default: return launch_elementwise<2>(loop, MoveWords<uint64_t>{}, "copy_");
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
