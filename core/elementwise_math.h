// The scalar formulas of the elementwise primitives, forward and backward, in one place for every
// backend: the CPU kernels (core/cpu) and the CUDA kernels (cuda/kernels) both compute each value
// here. They run in the compute type C: float for f32/bf16/f16, double for f64, the integer itself
// for integers. Everything is EMBER_HOST_DEVICE, so nvcc compiles it for the GPU too.
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/host_device.h"
#include "core/op_kinds.h"

namespace ember::formula {

// The C math library by overload: plain calls on the host, device functions under nvcc.
namespace libm {
#define EMBER_LIBM_UNARY(NAME)                                          \
  EMBER_HOST_DEVICE inline float NAME(float x) { return ::NAME##f(x); } \
  EMBER_HOST_DEVICE inline double NAME(double x) { return ::NAME(x); }
EMBER_LIBM_UNARY(exp)
EMBER_LIBM_UNARY(log) EMBER_LIBM_UNARY(log1p) EMBER_LIBM_UNARY(expm1) EMBER_LIBM_UNARY(sqrt) EMBER_LIBM_UNARY(fabs)
    EMBER_LIBM_UNARY(erf) EMBER_LIBM_UNARY(tanh) EMBER_LIBM_UNARY(sin) EMBER_LIBM_UNARY(cos) EMBER_LIBM_UNARY(floor)
        EMBER_LIBM_UNARY(ceil) EMBER_LIBM_UNARY(nearbyint)
#undef EMBER_LIBM_UNARY
            EMBER_HOST_DEVICE inline float pow(float x, float y) {
  return ::powf(x, y);
}
EMBER_HOST_DEVICE inline double pow(double x, double y) { return ::pow(x, y); }
EMBER_HOST_DEVICE inline float fmin(float x, float y) { return ::fminf(x, y); }
EMBER_HOST_DEVICE inline double fmin(double x, double y) { return ::fmin(x, y); }
EMBER_HOST_DEVICE inline float fmax(float x, float y) { return ::fmaxf(x, y); }
EMBER_HOST_DEVICE inline double fmax(double x, double y) { return ::fmax(x, y); }
}  // namespace libm

template <typename C>
EMBER_HOST_DEVICE inline bool is_nan(C x) {
  return x != x;
}

// g where y > 0, else 0. On the CPU through a bit mask: GCC does not turn `y > 0 ? g : 0` into
// vector code, and ReLU's backward runs over every activation.
template <typename C>
EMBER_HOST_DEVICE inline C keep_where_positive(C g, C y) {
#if !defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
    using Bits = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
    Bits bits;
    __builtin_memcpy(&bits, &g, sizeof(C));
    bits &= y > C(0) ? ~Bits(0) : Bits(0);
    C out;
    __builtin_memcpy(&out, &bits, sizeof(C));
    return out;
  }
#endif
  return y > C(0) ? g : C(0);
}

template <typename C>
EMBER_HOST_DEVICE inline C sigmoid(C x) {
  return C(1) / (C(1) + libm::exp(-x));
}

template <typename C>
EMBER_HOST_DEVICE inline C apply_unary(UnaryOp op, C x, double a, double b) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case UnaryOp::Neg:
        return -x;
      case UnaryOp::Exp:
        return libm::exp(x);
      case UnaryOp::Log:
        return libm::log(x);
      case UnaryOp::Log1p:
        return libm::log1p(x);
      case UnaryOp::Expm1:
        return libm::expm1(x);
      case UnaryOp::Sqrt:
        return libm::sqrt(x);
      case UnaryOp::Rsqrt:
        return C(1) / libm::sqrt(x);
      case UnaryOp::Abs:
        return libm::fabs(x);
      case UnaryOp::Sign:
        return is_nan(x) ? x : C((x > 0) - (x < 0));
      case UnaryOp::Relu:
        return x < C(0) ? C(0) : x;  // NaN passes; a select GCC vectorises
      case UnaryOp::Gelu:
        return C(0.5) * x * (C(1) + libm::erf(x * C(0.70710678118654752440)));
      case UnaryOp::GeluTanh: {
        const C k = C(0.79788456080286535588);  // sqrt(2 / pi)
        return C(0.5) * x * (C(1) + libm::tanh(k * (x + C(0.044715) * x * x * x)));
      }
      case UnaryOp::Silu:
        return x * sigmoid(x);
      case UnaryOp::Sigmoid:
        return sigmoid(x);
      case UnaryOp::Tanh:
        return libm::tanh(x);
      case UnaryOp::Clamp:
        return is_nan(x) ? x : libm::fmin(libm::fmax(x, C(a)), C(b));
      case UnaryOp::PowScalar:
        if (a == 2.0) return x * x;
        if (a == 0.5) return libm::sqrt(x);
        return libm::pow(x, C(a));
      case UnaryOp::LeakyRelu:
        return x > C(0) ? x : x * C(a);
      case UnaryOp::Reciprocal:
        return C(1) / x;
      case UnaryOp::Square:
        return x * x;
      case UnaryOp::Sin:
        return libm::sin(x);
      case UnaryOp::Cos:
        return libm::cos(x);
      case UnaryOp::Erf:
        return libm::erf(x);
      case UnaryOp::Floor:
        return libm::floor(x);
      case UnaryOp::Ceil:
        return libm::ceil(x);
      case UnaryOp::Round:
        return libm::nearbyint(x);
    }
    return x;
  } else if constexpr (std::is_same_v<C, bool>) {
    return x;  // core only lets abs and relu reach bool tensors; both are the identity
  } else {
    switch (op) {
      case UnaryOp::Neg:
        return static_cast<C>(-x);
      case UnaryOp::Abs:
        return x < 0 ? static_cast<C>(-x) : x;
      case UnaryOp::Sign:
        return static_cast<C>((x > 0) - (x < 0));
      case UnaryOp::Relu:
        return x > 0 ? x : C(0);
      case UnaryOp::Clamp: {
        // min(max(x, a), b), as for floats: with a > b every element becomes b.
        double v = static_cast<double>(x);
        if (v >= a && v <= b) return x;
        double r = v < a ? libm::ceil(a) : v;
        return static_cast<C>(r > b ? libm::floor(b) : r);
      }
      case UnaryOp::Square:
        return static_cast<C>(x * x);
      case UnaryOp::PowScalar: {
        C result = 1;
        for (int64_t e = static_cast<int64_t>(a); e > 0; --e) result = static_cast<C>(result * x);
        return result;
      }
      default:
        return x;  // floor/ceil/round are the identity on integers
    }
  }
}

// Which of the input x and the output y apply_unary_backward reads for `op`. Autograd saves only
// that one, so an in-place change to the other (`y = x.sin(); y += r`) stays legal, as in PyTorch.
EMBER_HOST_DEVICE constexpr UnaryGradOperand unary_grad_operand(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
    case UnaryOp::Sign:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
      return UnaryGradOperand::None;
    case UnaryOp::Exp:
    case UnaryOp::Expm1:
    case UnaryOp::Sqrt:
    case UnaryOp::Rsqrt:
    case UnaryOp::Relu:
    case UnaryOp::Sigmoid:
    case UnaryOp::Tanh:
    case UnaryOp::Reciprocal:
      return UnaryGradOperand::Output;
    default:
      return UnaryGradOperand::Input;
  }
}

// d(op)/dx times the incoming gradient g, from the operand unary_grad_operand names (the other
// may be garbage).
template <typename C>
EMBER_HOST_DEVICE inline C apply_unary_backward(UnaryOp op, C g, C x, C y, double a, double b) {
  (void)b;
  if constexpr (!std::is_floating_point_v<C>) {
    return C(0);
  } else {
    switch (op) {
      case UnaryOp::Neg:
        return -g;
      case UnaryOp::Exp:
        return g * y;
      case UnaryOp::Log:
        return g / x;
      case UnaryOp::Log1p:
        return g / (C(1) + x);
      case UnaryOp::Expm1:
        return g * (y + C(1));
      case UnaryOp::Sqrt:
        return g / (C(2) * y);
      case UnaryOp::Rsqrt:
        return C(-0.5) * g * y * y * y;
      case UnaryOp::Abs:
        return x > C(0) ? g : (x < C(0) ? -g : C(0));
      case UnaryOp::Sign:
      case UnaryOp::Floor:
      case UnaryOp::Ceil:
      case UnaryOp::Round:
        return C(0);
      case UnaryOp::Relu:
        return keep_where_positive(g, y);
      case UnaryOp::Gelu: {
        const C cdf = C(0.5) * (C(1) + libm::erf(x * C(0.70710678118654752440)));
        const C pdf = libm::exp(C(-0.5) * x * x) * C(0.39894228040143267794);  // 1 / sqrt(2 pi)
        return g * (cdf + x * pdf);
      }
      case UnaryOp::GeluTanh: {
        const C k = C(0.79788456080286535588), c = C(0.044715);
        const C t = libm::tanh(k * (x + c * x * x * x));
        return g * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * k * (C(1) + C(3) * c * x * x));
      }
      case UnaryOp::Silu: {
        const C s = sigmoid(x);
        return g * s * (C(1) + x * (C(1) - s));
      }
      case UnaryOp::Sigmoid:
        return g * y * (C(1) - y);
      case UnaryOp::Tanh:
        return g * (C(1) - y * y);
      case UnaryOp::Clamp:
        return (x >= C(a) && x <= C(b)) ? g : C(0);
      case UnaryOp::PowScalar:
        if (a == 0.0) return C(0);
        return g * C(a) * libm::pow(x, C(a - 1.0));
      case UnaryOp::LeakyRelu:
        return x > C(0) ? g : g * C(a);
      case UnaryOp::Reciprocal:
        return -g * y * y;
      case UnaryOp::Square:
        return C(2) * g * x;
      case UnaryOp::Sin:
        return g * libm::cos(x);
      case UnaryOp::Cos:
        return -g * libm::sin(x);
      case UnaryOp::Erf:
        return g * C(1.12837916709551257390) * libm::exp(-x * x);  // 2 / sqrt(pi)
    }
    return g;
  }
}

template <typename C>
EMBER_HOST_DEVICE inline C int_pow(C base, C exponent) {
  if constexpr (std::is_signed_v<C>) {
    if (exponent < 0) return base == 1 ? C(1) : (base == C(-1) ? (exponent % 2 ? C(-1) : C(1)) : C(0));
  }
  C result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = static_cast<C>(result * base);
    exponent >>= 1;
    // Squaring once more than needed would overflow (undefined for signed C) even when the
    // result fits: 3^39 fits in int64, 3^64 does not.
    if (exponent > 0) base = static_cast<C>(base * base);
  }
  return result;
}

// A kernel that knows `op` at compile time passes it as a constant, and the switch folds away.
template <typename C>
EMBER_HOST_DEVICE inline C apply_binary(BinaryOp op, C x, C y) {
  switch (op) {
    case BinaryOp::Add:
      return static_cast<C>(x + y);
    case BinaryOp::Sub:
      return static_cast<C>(x - y);
    case BinaryOp::Mul:
      return static_cast<C>(x * y);
    case BinaryOp::Div:
      return static_cast<C>(x / y);
    case BinaryOp::Pow:
      if constexpr (std::is_floating_point_v<C>)
        return libm::pow(x, y);
      else
        return int_pow<C>(x, y);
    case BinaryOp::Minimum:
      if constexpr (std::is_floating_point_v<C>) {
        if (is_nan(x) || is_nan(y)) return is_nan(x) ? x : y;  // NaN propagates
      }
      return y < x ? y : x;
    case BinaryOp::Maximum:
      if constexpr (std::is_floating_point_v<C>) {
        if (is_nan(x) || is_nan(y)) return is_nan(x) ? x : y;
      }
      return y > x ? y : x;
    case BinaryOp::AddRelu: {
      const C sum = static_cast<C>(x + y);
      return sum < C(0) ? C(0) : sum;  // NaN passes, as in relu
    }
  }
  return x;
}

template <typename C>
EMBER_HOST_DEVICE inline bool apply_compare(CompareOp op, C x, C y) {
  switch (op) {
    case CompareOp::Eq:
      return x == y;
    case CompareOp::Ne:
      return x != y;
    case CompareOp::Lt:
      return x < y;
    case CompareOp::Le:
      return x <= y;
    case CompareOp::Gt:
      return x > y;
    case CompareOp::Ge:
      return x >= y;
  }
  return false;
}

// Casts between element types, as copy_ and to(dtype) define them: through the source's compute
// type; to bool, nonzero-ness.
template <typename D, typename S>
EMBER_HOST_DEVICE inline D cast(S value) {
  if constexpr (std::is_same_v<D, bool>)
    return static_cast<ComputeType<S>>(value) != ComputeType<S>(0);
  else if constexpr (std::is_same_v<D, BFloat16> || std::is_same_v<D, Half>)
    return D(static_cast<float>(static_cast<ComputeType<S>>(value)));
  else
    return static_cast<D>(static_cast<ComputeType<S>>(value));
}

}  // namespace ember::formula
