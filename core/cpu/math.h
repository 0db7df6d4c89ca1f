// Scalar math shared by the CPU kernels: one definition of each unary/binary primitive, in the
// compute type (float for f32/bf16/f16, double for f64, the integer itself for integers).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/op_kinds.h"

namespace ember::cpu {

// g where y > 0, else 0, selected by a bit mask: GCC does not turn `y > 0 ? g : 0` into vector
// code, and ReLU's backward runs over every activation.
template <typename C>
inline C keep_where_positive(C g, C y) {
  if constexpr (std::is_same_v<C, float> || std::is_same_v<C, double>) {
    using Bits = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
    return std::bit_cast<C>(std::bit_cast<Bits>(g) & (y > C(0) ? ~Bits(0) : Bits(0)));
  } else {
    return y > C(0) ? g : C(0);
  }
}

template <typename C>
inline C sigmoid(C x) {
  return C(1) / (C(1) + std::exp(-x));
}

template <typename C>
inline C apply_unary(UnaryOp op, C x, double a, double b) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case UnaryOp::Neg: return -x;
      case UnaryOp::Exp: return std::exp(x);
      case UnaryOp::Log: return std::log(x);
      case UnaryOp::Log1p: return std::log1p(x);
      case UnaryOp::Expm1: return std::expm1(x);
      case UnaryOp::Sqrt: return std::sqrt(x);
      case UnaryOp::Rsqrt: return C(1) / std::sqrt(x);
      case UnaryOp::Abs: return std::fabs(x);
      case UnaryOp::Sign: return std::isnan(x) ? x : C((x > 0) - (x < 0));
      case UnaryOp::Relu: return x < C(0) ? C(0) : x;  // NaN passes; a select GCC vectorises
      case UnaryOp::Gelu: return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
      case UnaryOp::GeluTanh: {
        const C k = C(0.79788456080286535588);  // sqrt(2 / pi)
        return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
      }
      case UnaryOp::Silu: return x * sigmoid(x);
      case UnaryOp::Sigmoid: return sigmoid(x);
      case UnaryOp::Tanh: return std::tanh(x);
      case UnaryOp::Clamp: return std::isnan(x) ? x : std::fmin(std::fmax(x, C(a)), C(b));
      case UnaryOp::PowScalar:
        if (a == 2.0) return x * x;
        if (a == 0.5) return std::sqrt(x);
        return std::pow(x, C(a));
      case UnaryOp::LeakyRelu: return x > C(0) ? x : x * C(a);
      case UnaryOp::Reciprocal: return C(1) / x;
      case UnaryOp::Square: return x * x;
      case UnaryOp::Sin: return std::sin(x);
      case UnaryOp::Cos: return std::cos(x);
      case UnaryOp::Erf: return std::erf(x);
      case UnaryOp::Floor: return std::floor(x);
      case UnaryOp::Ceil: return std::ceil(x);
      case UnaryOp::Round: return std::nearbyint(x);
    }
    return x;
  } else if constexpr (std::is_same_v<C, bool>) {
    return x;  // core only lets abs and relu reach bool tensors; both are the identity
  } else {
    switch (op) {
      case UnaryOp::Neg: return static_cast<C>(-x);
      case UnaryOp::Abs: return x < 0 ? static_cast<C>(-x) : x;
      case UnaryOp::Sign: return static_cast<C>((x > 0) - (x < 0));
      case UnaryOp::Relu: return x > 0 ? x : C(0);
      case UnaryOp::Clamp: {
        // min(max(x, a), b), as for floats: with a > b every element becomes b.
        double v = static_cast<double>(x);
        if (v >= a && v <= b) return x;
        double r = v < a ? std::ceil(a) : v;
        return static_cast<C>(r > b ? std::floor(b) : r);
      }
      case UnaryOp::Square: return static_cast<C>(x * x);
      case UnaryOp::PowScalar: {
        C result = 1;
        for (int64_t e = static_cast<int64_t>(a); e > 0; --e) result = static_cast<C>(result * x);
        return result;
      }
      default: return x;  // floor/ceil/round are the identity on integers
    }
  }
}

// d(op)/dx times the incoming gradient g, given the input x and the forward output y (whichever
// is cheaper to use). Kept beside apply_unary so each formula sits next to its forward.
template <typename C>
inline C apply_unary_backward(UnaryOp op, C g, C x, C y, double a, double b) {
  if constexpr (!std::is_floating_point_v<C>) {
    return C(0);
  } else {
    switch (op) {
      case UnaryOp::Neg: return -g;
      case UnaryOp::Exp: return g * y;
      case UnaryOp::Log: return g / x;
      case UnaryOp::Log1p: return g / (C(1) + x);
      case UnaryOp::Expm1: return g * (y + C(1));
      case UnaryOp::Sqrt: return g / (C(2) * y);
      case UnaryOp::Rsqrt: return C(-0.5) * g * y * y * y;
      case UnaryOp::Abs: return x > C(0) ? g : (x < C(0) ? -g : C(0));
      case UnaryOp::Sign: case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Round: return C(0);
      case UnaryOp::Relu: return keep_where_positive(g, y);
      case UnaryOp::Gelu: {
        const C cdf = C(0.5) * (C(1) + std::erf(x * C(0.70710678118654752440)));
        const C pdf = std::exp(C(-0.5) * x * x) * C(0.39894228040143267794);  // 1 / sqrt(2 pi)
        return g * (cdf + x * pdf);
      }
      case UnaryOp::GeluTanh: {
        const C k = C(0.79788456080286535588), c = C(0.044715);
        const C t = std::tanh(k * (x + c * x * x * x));
        return g * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * k * (C(1) + C(3) * c * x * x));
      }
      case UnaryOp::Silu: {
        const C s = sigmoid(x);
        return g * s * (C(1) + x * (C(1) - s));
      }
      case UnaryOp::Sigmoid: return g * y * (C(1) - y);
      case UnaryOp::Tanh: return g * (C(1) - y * y);
      case UnaryOp::Clamp: return (x >= C(a) && x <= C(b)) ? g : C(0);
      case UnaryOp::PowScalar:
        if (a == 0.0) return C(0);
        return g * C(a) * std::pow(x, C(a - 1.0));
      case UnaryOp::LeakyRelu: return x > C(0) ? g : g * C(a);
      case UnaryOp::Reciprocal: return -g * y * y;
      case UnaryOp::Square: return C(2) * g * x;
      case UnaryOp::Sin: return g * std::cos(x);
      case UnaryOp::Cos: return -g * std::sin(x);
      case UnaryOp::Erf: return g * C(1.12837916709551257390) * std::exp(-x * x);  // 2 / sqrt(pi)
    }
    return g;
  }
}

template <typename C>
inline C int_pow(C base, C exponent) {
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

}  // namespace ember::cpu
