// Binary, compare and where kernels. Any operand but the output may be a host scalar
// (`x * 0.5`): it arrives as a kernel argument, and its pointer in the DeviceLoop is null.
#include "core/elementwise_math.h"
#include "cuda/kernels/entries.h"
#include "cuda/kernels/loops.cuh"

namespace ember::cuda {

namespace {

template <typename T>
struct Binary {
  BinaryOp op;
  T scalar_a, scalar_b;
  __device__ void operator()(char* const* data, const int64_t* off) const {
    using C = ComputeType<T>;
    const C x = static_cast<C>(load_operand<T>(data[1], off[1], scalar_a));
    const C y = static_cast<C>(load_operand<T>(data[2], off[2], scalar_b));
    *reinterpret_cast<T*>(data[0] + off[0]) = static_cast<T>(formula::apply_binary<C>(op, x, y));
  }
};

template <typename T>
struct Compare {
  CompareOp op;
  T scalar_a, scalar_b;
  __device__ void operator()(char* const* data, const int64_t* off) const {
    using C = ComputeType<T>;
    const C x = static_cast<C>(load_operand<T>(data[1], off[1], scalar_a));
    const C y = static_cast<C>(load_operand<T>(data[2], off[2], scalar_b));
    *reinterpret_cast<bool*>(data[0] + off[0]) = formula::apply_compare<C>(op, x, y);
  }
};

template <typename T>
struct Where {
  bool scalar_condition;
  T scalar_a, scalar_b;
  __device__ void operator()(char* const* data, const int64_t* off) const {
    const bool c = load_operand<bool>(data[1], off[1], scalar_condition);
    *reinterpret_cast<T*>(data[0] + off[0]) =
        c ? load_operand<T>(data[2], off[2], scalar_a) : load_operand<T>(data[3], off[3], scalar_b);
  }
};

}  // namespace

void binary_kernel(BinaryOp op, const StridedLoop& loop) {
  EMBER_DISPATCH_ALL(loop.dtypes[0], binary_op_name(op), [&] {
    Binary<scalar_t> f{op, host_scalar<scalar_t>(loop, 1), host_scalar<scalar_t>(loop, 2)};
    launch_elementwise<3>(loop, f, binary_op_name(op));
  });
}

void compare_kernel(CompareOp op, const StridedLoop& loop) {
  EMBER_DISPATCH_ALL(loop.dtypes[1], compare_op_name(op), [&] {
    Compare<scalar_t> f{op, host_scalar<scalar_t>(loop, 1), host_scalar<scalar_t>(loop, 2)};
    launch_elementwise<3>(loop, f, compare_op_name(op));
  });
}

void where_kernel(const StridedLoop& loop) {
  EMBER_DISPATCH_ALL(loop.dtypes[0], "where", [&] {
    Where<scalar_t> f{host_scalar<bool>(loop, 1), host_scalar<scalar_t>(loop, 2), host_scalar<scalar_t>(loop, 3)};
    launch_elementwise<4>(loop, f, "where");
  });
}

}  // namespace ember::cuda
