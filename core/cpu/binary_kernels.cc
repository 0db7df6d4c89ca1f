// CPU binary, comparison and where kernels. Rows whose operands are contiguous, or a contiguous
// operand against a broadcast scalar, get vectorisable loops (bf16 ones in float32 blocks,
// bf16_rows.h).
#include <cmath>

#include "core/cpu/bf16_rows.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/elementwise_math.h"

namespace ember::cpu {

namespace {

template <typename C, BinaryOp Op>
inline C apply_binary(C x, C y) {
  return formula::apply_binary<C>(Op, x, y);
}

template <typename T, BinaryOp Op>
void binary_typed(const StridedLoop& loop) {
  using C = ComputeType<T>;
  const bool streaming = streams_output(loop, sizeof(T));
  for_each_row(loop, kElementwiseGrain, [streaming](int64_t n, char* const* p, const int64_t* s) {
    T* out = reinterpret_cast<T*>(p[0]);
    const T* a = reinterpret_cast<const T*>(p[1]);
    const T* b = reinterpret_cast<const T*>(p[2]);
    constexpr int64_t e = sizeof(T);
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (s[0] == e && (s[1] == e || s[1] == 0) && (s[2] == e || s[2] == 0)) {
        bf16_rows<2>(out, n, {a, b}, {s[1] == 0, s[2] == 0}, [](float* r, const float* const* x, int64_t m) {
          const float* __restrict x0 = x[0];
          const float* __restrict x1 = x[1];
          for (int64_t i = 0; i < m; ++i) r[i] = apply_binary<float, Op>(x0[i], x1[i]);
        });
        return;
      }
    }
    if (s[0] == e && s[1] == e && s[2] == e) {
      const auto value = [a, b](int64_t i) { return static_cast<T>(apply_binary<C, Op>(C(a[i]), C(b[i]))); };
      write_elements(out, n, value, streaming);
    } else if (s[0] == e && s[1] == e && s[2] == 0) {
      const C bv = C(*b);
      const auto value = [a, bv](int64_t i) { return static_cast<T>(apply_binary<C, Op>(C(a[i]), bv)); };
      write_elements(out, n, value, streaming);
    } else if (s[0] == e && s[1] == 0 && s[2] == e) {
      const C av = C(*a);
      const auto value = [av, b](int64_t i) { return static_cast<T>(apply_binary<C, Op>(av, C(b[i]))); };
      write_elements(out, n, value, streaming);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        C x = C(*reinterpret_cast<const T*>(p[1] + i * s[1]));
        C y = C(*reinterpret_cast<const T*>(p[2] + i * s[2]));
        *reinterpret_cast<T*>(p[0] + i * s[0]) = static_cast<T>(apply_binary<C, Op>(x, y));
      }
    }
  });
}

template <typename T>
void binary_for_type(BinaryOp op, const StridedLoop& loop) {
  switch (op) {
    case BinaryOp::Add:
      return binary_typed<T, BinaryOp::Add>(loop);
    case BinaryOp::Sub:
      return binary_typed<T, BinaryOp::Sub>(loop);
    case BinaryOp::Mul:
      return binary_typed<T, BinaryOp::Mul>(loop);
    case BinaryOp::Div:
      return binary_typed<T, BinaryOp::Div>(loop);
    case BinaryOp::Pow:
      return binary_typed<T, BinaryOp::Pow>(loop);
    case BinaryOp::Minimum:
      return binary_typed<T, BinaryOp::Minimum>(loop);
    case BinaryOp::Maximum:
      return binary_typed<T, BinaryOp::Maximum>(loop);
    case BinaryOp::AddRelu:
      return binary_typed<T, BinaryOp::AddRelu>(loop);
  }
}

template <typename T>
void compare_typed(CompareOp op, const StridedLoop& loop) {
  using C = ComputeType<T>;
  for_each_row(loop, kElementwiseGrain, [op](int64_t n, char* const* p, const int64_t* s) {
    for (int64_t i = 0; i < n; ++i) {
      C x = C(*reinterpret_cast<const T*>(p[1] + i * s[1]));
      C y = C(*reinterpret_cast<const T*>(p[2] + i * s[2]));
      *reinterpret_cast<bool*>(p[0] + i * s[0]) = formula::apply_compare<C>(op, x, y);
    }
  });
}

template <typename T>
void where_typed(const StridedLoop& loop) {
  for_each_row(loop, kElementwiseGrain, [](int64_t n, char* const* p, const int64_t* s) {
    for (int64_t i = 0; i < n; ++i) {
      bool c = *reinterpret_cast<const bool*>(p[1] + i * s[1]);
      *reinterpret_cast<T*>(p[0] + i * s[0]) = *reinterpret_cast<const T*>(p[c ? 2 : 3] + i * s[c ? 2 : 3]);
    }
  });
}

}  // namespace

void binary_kernel(BinaryOp op, const StridedLoop& loop) {
  EMBER_DISPATCH_ALL(loop.dtypes[0], binary_op_name(op), [&] { binary_for_type<scalar_t>(op, loop); });
}

void compare_kernel(CompareOp op, const StridedLoop& loop) {
  EMBER_DISPATCH_ALL(loop.dtypes[1], compare_op_name(op), [&] { compare_typed<scalar_t>(op, loop); });
}

void where_kernel(const StridedLoop& loop) {
  EMBER_DISPATCH_ALL(loop.dtypes[0], "where", [&] { where_typed<scalar_t>(loop); });
}

}  // namespace ember::cpu
