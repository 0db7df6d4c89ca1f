// Unary kernels: one kernel per dtype, the op chosen inside it (the same for every thread, so
// the branch costs nothing on a GPU and keeps nvcc's output small).
#include "core/elementwise_math.h"
#include "cuda/kernels/loops.cuh"
#include "cuda/kernels/entries.h"

namespace ember::cuda {

namespace {

template <typename T>
struct Unary {
  UnaryOp op;
  double a, b;
  __device__ void operator()(char* const* data, const int64_t* off) const {
    using C = ComputeType<T>;
    const C x = static_cast<C>(*reinterpret_cast<const T*>(data[1] + off[1]));
    *reinterpret_cast<T*>(data[0] + off[0]) = static_cast<T>(formula::apply_unary<C>(op, x, a, b));
  }
};

template <typename T>
struct UnaryBackward {
  UnaryOp op;
  double a, b;
  __device__ void operator()(char* const* data, const int64_t* off) const {
    using C = ComputeType<T>;
    const C g = static_cast<C>(*reinterpret_cast<const T*>(data[1] + off[1]));
    const C x = static_cast<C>(*reinterpret_cast<const T*>(data[2] + off[2]));
    const C y = static_cast<C>(*reinterpret_cast<const T*>(data[3] + off[3]));
    *reinterpret_cast<T*>(data[0] + off[0]) = static_cast<T>(formula::apply_unary_backward<C>(op, g, x, y, a, b));
  }
};

}  // namespace

void unary_kernel(UnaryOp op, const StridedLoop& loop, double a, double b) {
  EMBER_DISPATCH_ALL(loop.dtypes[0], unary_op_name(op), [&] {
    launch_elementwise<2>(loop, Unary<scalar_t>{op, a, b}, unary_op_name(op));
  });
}

void unary_backward_kernel(UnaryOp op, const StridedLoop& loop, double a, double b) {
  EMBER_DISPATCH_FLOATING(loop.dtypes[0], unary_op_name(op), [&] {
    launch_elementwise<4>(loop, UnaryBackward<scalar_t>{op, a, b}, unary_op_name(op));
  });
}

}  // namespace ember::cuda
