// CPU unary and fill kernels. Contiguous rows get a tight loop the compiler vectorises (bf16 ones
// in float32 blocks, bf16_rows.h); other rows use the strided form.
#include "core/cpu/bf16_rows.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/elementwise_math.h"

namespace ember::cpu {

namespace {

template <typename T, UnaryOp Op>
void unary_typed(const StridedLoop& loop, double a, double b) {
  using C = ComputeType<T>;
  const bool streaming = streams_output(loop, sizeof(T));
  for_each_row(loop, kElementwiseGrain, [a, b, streaming](int64_t n, char* const* p, const int64_t* s) {
    T* out = reinterpret_cast<T*>(p[0]);
    const T* in = reinterpret_cast<const T*>(p[1]);
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
        bf16_rows<1>(out, n, {in}, {false}, [a, b](float* r, const float* const* x, int64_t m) {
          const float* __restrict x0 = x[0];
          for (int64_t i = 0; i < m; ++i) r[i] = formula::apply_unary<float>(Op, x0[i], a, b);
        });
        return;
      }
    }
    if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
      const auto value = [in, a, b](int64_t i) {
        return static_cast<T>(formula::apply_unary<C>(Op, static_cast<C>(in[i]), a, b));
      };
      write_elements(out, n, value, streaming);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const T& x = *reinterpret_cast<const T*>(p[1] + i * s[1]);
        *reinterpret_cast<T*>(p[0] + i * s[0]) = static_cast<T>(formula::apply_unary<C>(Op, static_cast<C>(x), a, b));
      }
    }
  });
}

// Integer and bool loops only for the ops that keep those dtypes (core/op_kinds.h): unary()
// computes the others in float32, and their loops would only cost compile time (a fifth of it).
template <typename T>
constexpr bool has_unary_loop(UnaryOp op) {
  if constexpr (std::is_same_v<T, bool>) return unary_takes_bool(op);
  if constexpr (!std::is_floating_point_v<ComputeType<T>>) return unary_takes_integers(op);
  return true;
}

template <typename T>
void unary_for_type(UnaryOp op, const StridedLoop& loop, double a, double b) {
  switch (op) {
    // clang-format off: the case macros carry no semicolon, which the formatter cannot line up
#define EMBER_UNARY_CASE(NAME)                                                                        \
  case UnaryOp::NAME:                                                                                 \
    if constexpr (has_unary_loop<T>(UnaryOp::NAME)) return unary_typed<T, UnaryOp::NAME>(loop, a, b); \
    break;
    EMBER_UNARY_CASE(Neg)
    EMBER_UNARY_CASE(Exp)
    EMBER_UNARY_CASE(Log)
    EMBER_UNARY_CASE(Log1p)
    EMBER_UNARY_CASE(Expm1)
    EMBER_UNARY_CASE(Sqrt)
    EMBER_UNARY_CASE(Rsqrt)
    EMBER_UNARY_CASE(Abs)
    EMBER_UNARY_CASE(Sign)
    EMBER_UNARY_CASE(Relu)
    EMBER_UNARY_CASE(Gelu)
    EMBER_UNARY_CASE(GeluTanh)
    EMBER_UNARY_CASE(Silu)
    EMBER_UNARY_CASE(Sigmoid)
    EMBER_UNARY_CASE(Tanh)
    EMBER_UNARY_CASE(Clamp)
    EMBER_UNARY_CASE(PowScalar)
    EMBER_UNARY_CASE(LeakyRelu)
    EMBER_UNARY_CASE(Reciprocal)
    EMBER_UNARY_CASE(Square)
    EMBER_UNARY_CASE(Sin)
    EMBER_UNARY_CASE(Cos)
    EMBER_UNARY_CASE(Erf)
    EMBER_UNARY_CASE(Floor)
    EMBER_UNARY_CASE(Ceil)
    EMBER_UNARY_CASE(Round)
#undef EMBER_UNARY_CASE
    // clang-format on
  }
  ::ember::detail::unsupported_dtype(unary_op_name(op), loop.dtypes[0]);
}

template <typename T, UnaryOp Op>
void unary_backward_typed(const StridedLoop& loop, double a, double b) {
  using C = ComputeType<T>;
  const bool streaming = streams_output(loop, sizeof(T));
  for_each_row(loop, kElementwiseGrain, [a, b, streaming](int64_t n, char* const* p, const int64_t* s) {
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (s[0] == sizeof(T) && s[1] == sizeof(T) && s[2] == sizeof(T) && s[3] == sizeof(T)) {
        const auto* in = reinterpret_cast<const BFloat16* const*>(p + 1);
        bf16_rows<3>(reinterpret_cast<BFloat16*>(p[0]), n, {in[0], in[1], in[2]}, {false, false, false},
                     [a, b](float* r, const float* const* x, int64_t m) {
                       const float* __restrict g = x[0];
                       const float* __restrict xs = x[1];
                       const float* __restrict ys = x[2];
                       for (int64_t i = 0; i < m; ++i)
                         r[i] = formula::apply_unary_backward<float>(Op, g[i], xs[i], ys[i], a, b);
                     });
        return;
      }
    }
    if (s[0] == sizeof(T) && s[1] == sizeof(T) && s[2] == sizeof(T) && s[3] == sizeof(T)) {
      T* out = reinterpret_cast<T*>(p[0]);
      const T* g = reinterpret_cast<const T*>(p[1]);
      const T* x = reinterpret_cast<const T*>(p[2]);
      const T* y = reinterpret_cast<const T*>(p[3]);
      const auto value = [g, x, y, a, b](int64_t i) {
        return static_cast<T>(formula::apply_unary_backward<C>(Op, C(g[i]), C(x[i]), C(y[i]), a, b));
      };
      write_elements(out, n, value, streaming);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      C g = C(*reinterpret_cast<const T*>(p[1] + i * s[1]));
      C x = C(*reinterpret_cast<const T*>(p[2] + i * s[2]));
      C y = C(*reinterpret_cast<const T*>(p[3] + i * s[3]));
      *reinterpret_cast<T*>(p[0] + i * s[0]) = static_cast<T>(formula::apply_unary_backward<C>(Op, g, x, y, a, b));
    }
  });
}

template <typename T>
void unary_backward_for_type(UnaryOp op, const StridedLoop& loop, double a, double b) {
  switch (op) {
    // clang-format off: the case macros carry no semicolon, which the formatter cannot line up
#define EMBER_UNARY_CASE(NAME) \
  case UnaryOp::NAME:          \
    return unary_backward_typed<T, UnaryOp::NAME>(loop, a, b);
    EMBER_UNARY_CASE(Neg)
    EMBER_UNARY_CASE(Exp)
    EMBER_UNARY_CASE(Log)
    EMBER_UNARY_CASE(Log1p)
    EMBER_UNARY_CASE(Expm1)
    EMBER_UNARY_CASE(Sqrt)
    EMBER_UNARY_CASE(Rsqrt)
    EMBER_UNARY_CASE(Abs)
    EMBER_UNARY_CASE(Sign)
    EMBER_UNARY_CASE(Relu)
    EMBER_UNARY_CASE(Gelu)
    EMBER_UNARY_CASE(GeluTanh)
    EMBER_UNARY_CASE(Silu)
    EMBER_UNARY_CASE(Sigmoid)
    EMBER_UNARY_CASE(Tanh)
    EMBER_UNARY_CASE(Clamp)
    EMBER_UNARY_CASE(PowScalar)
    EMBER_UNARY_CASE(LeakyRelu)
    EMBER_UNARY_CASE(Reciprocal)
    EMBER_UNARY_CASE(Square)
    EMBER_UNARY_CASE(Sin)
    EMBER_UNARY_CASE(Cos)
    EMBER_UNARY_CASE(Erf)
    EMBER_UNARY_CASE(Floor)
    EMBER_UNARY_CASE(Ceil)
    EMBER_UNARY_CASE(Round)
#undef EMBER_UNARY_CASE
    // clang-format on
  }
}

template <typename T>
void fill_typed(const StridedLoop& loop, T value) {
  for_each_row(loop, kElementwiseGrain, [value](int64_t n, char* const* p, const int64_t* s) {
    if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
      if (s[0] == sizeof(T)) {  // as 16-bit words, which the compiler vectorises (the struct it does not)
        uint16_t* out = reinterpret_cast<uint16_t*>(p[0]);
        for (int64_t i = 0; i < n; ++i) out[i] = value.bits;
        return;
      }
    }
    if (s[0] == sizeof(T)) {
      T* out = reinterpret_cast<T*>(p[0]);
      for (int64_t i = 0; i < n; ++i) out[i] = value;
    } else {
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = value;
    }
  });
}

}  // namespace

void unary_kernel(UnaryOp op, const StridedLoop& loop, double a, double b) {
  EMBER_DISPATCH_ALL(loop.dtypes[0], unary_op_name(op), [&] { unary_for_type<scalar_t>(op, loop, a, b); });
}

void unary_backward_kernel(UnaryOp op, const StridedLoop& loop, double a, double b) {
  EMBER_DISPATCH_FLOATING(loop.dtypes[0], unary_op_name(op),
                          [&] { unary_backward_for_type<scalar_t>(op, loop, a, b); });
}

void fill_kernel(const StridedLoop& loop, Scalar value) {
  EMBER_DISPATCH_ALL(loop.dtypes[0], "fill_", [&] { fill_typed<scalar_t>(loop, value.to<scalar_t>()); });
}

}  // namespace ember::cpu
