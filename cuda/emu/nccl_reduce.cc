// Reductions per element type; see nccl_reduce.h for the arithmetic NCCL's kernels use.
#include "cuda/emu/nccl_reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/half.h"

namespace ember::emu::nccl {

namespace {

template <class T>
T combine_integers(ncclRedOp_t op, T a, T b) {
  using U = std::make_unsigned_t<T>;  // wraps like the GPU instead of signed overflow
  switch (op) {
    case ncclProd:
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case ncclMax:
      return std::max(a, b);
    case ncclMin:
      return std::min(a, b);
    default:
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  }
}

template <class F>
F combine_floats(ncclRedOp_t op, F a, F b) {
  switch (op) {
    case ncclProd:
      return a * b;
    case ncclMax:
      return std::fmax(a, b);
    case ncclMin:
      return std::fmin(a, b);
    default:
      return a + b;
  }
}

template <class T>
void reduce_integers(ncclRedOp_t op, int nranks, const void* const* inputs, T* out, size_t n) {
  const T* first = static_cast<const T*>(inputs[0]);
  std::copy(first, first + n, out);
  for (int q = 1; q < nranks; ++q) {
    const T* x = static_cast<const T*>(inputs[q]);
    for (size_t i = 0; i < n; ++i) out[i] = combine_integers(op, out[i], x[i]);
  }
  if (op == ncclAvg)
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(out[i] / static_cast<T>(nranks));
}

// T is the stored type, F the arithmetic one (float for the 16-bit types).
template <class T, class F>
void reduce_floats(ncclRedOp_t op, int nranks, const void* const* inputs, T* out, size_t n) {
  const F scale = op == ncclAvg ? F(1) / static_cast<F>(nranks) : F(1);
  auto load = [&](int q, size_t i) {
    const F x = static_cast<F>(static_cast<const T*>(inputs[q])[i]);
    return op == ncclAvg ? static_cast<F>(static_cast<T>(x * scale)) : x;
  };
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(load(0, i));
  for (int q = 1; q < nranks; ++q)
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(combine_floats(op, static_cast<F>(out[i]), load(q, i)));
}

}  // namespace

size_t element_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* type_name(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
      return "ncclInt8";
    case ncclUint8:
      return "ncclUint8";
    case ncclInt32:
      return "ncclInt32";
    case ncclUint32:
      return "ncclUint32";
    case ncclInt64:
      return "ncclInt64";
    case ncclUint64:
      return "ncclUint64";
    case ncclFloat16:
      return "ncclFloat16";
    case ncclFloat32:
      return "ncclFloat32";
    case ncclFloat64:
      return "ncclFloat64";
    case ncclBfloat16:
      return "ncclBfloat16";
    case ncclFloat8e4m3:
      return "ncclFloat8e4m3";
    case ncclFloat8e5m2:
      return "ncclFloat8e5m2";
    default:
      return "an invalid ncclDataType_t";
  }
}

const char* op_name(ncclRedOp_t op) {
  switch (op) {
    case ncclSum:
      return "ncclSum";
    case ncclProd:
      return "ncclProd";
    case ncclMax:
      return "ncclMax";
    case ncclMin:
      return "ncclMin";
    case ncclAvg:
      return "ncclAvg";
    default:
      return "an invalid ncclRedOp_t";
  }
}

bool valid_op(ncclRedOp_t op) { return op >= ncclSum && op <= ncclAvg; }

void reduce(ncclDataType_t type, ncclRedOp_t op, int nranks, const void* const* inputs, void* out, size_t n) {
  switch (type) {
    case ncclInt8:
      return reduce_integers(op, nranks, inputs, static_cast<int8_t*>(out), n);
    case ncclUint8:
      return reduce_integers(op, nranks, inputs, static_cast<uint8_t*>(out), n);
    case ncclInt32:
      return reduce_integers(op, nranks, inputs, static_cast<int32_t*>(out), n);
    case ncclUint32:
      return reduce_integers(op, nranks, inputs, static_cast<uint32_t*>(out), n);
    case ncclInt64:
      return reduce_integers(op, nranks, inputs, static_cast<int64_t*>(out), n);
    case ncclUint64:
      return reduce_integers(op, nranks, inputs, static_cast<uint64_t*>(out), n);
    case ncclFloat16:
      return reduce_floats<Half, float>(op, nranks, inputs, static_cast<Half*>(out), n);
    case ncclBfloat16:
      return reduce_floats<BFloat16, float>(op, nranks, inputs, static_cast<BFloat16*>(out), n);
    case ncclFloat32:
      return reduce_floats<float, float>(op, nranks, inputs, static_cast<float*>(out), n);
    case ncclFloat64:
      return reduce_floats<double, double>(op, nranks, inputs, static_cast<double*>(out), n);
    default:
      return;
  }
}

}  // namespace ember::emu::nccl
