// The fused optimizer updates per element (SGD, Adam/AdamW), shared by the CPU and CUDA kernels.
// Every operation rounds in the parameter's dtype, in the order of PyTorch's op-by-op
// single-tensor update; a kernel built from these must not contract a * b + c into an FMA
// (GCC's fp-contract=off, nvcc's --fmad=false), or it would skip a rounding the op-by-op update makes.
#pragma once

#include <cmath>

#include "core/backend.h"
#include "core/elementwise_math.h"
#include "core/host_device.h"

namespace ember::formula {

// Scalars are cast to T once, as PyTorch casts a Python float operand to the tensor's dtype.
template <typename T>
struct SgdScalars {
  T sign, weight_decay, momentum, one_minus_dampening, neg_lr;
  static SgdScalars make(const SgdUpdateArgs& args) {
    return {args.maximize ? T(-1) : T(1), T(args.weight_decay), T(args.momentum), T(1.0 - args.dampening), T(-args.lr)};
  }
};

template <typename T, bool kWeightDecay, bool kMomentum, bool kNesterov, bool kFirstStep>
EMBER_HOST_DEVICE inline void sgd_element(T& param, T grad, T* buf, const SgdScalars<T>& s) {
  T d = grad * s.sign;  // exact: -grad when maximizing, grad otherwise
  if constexpr (kWeightDecay) d = d + s.weight_decay * param;
  if constexpr (kMomentum) {
    T b;
    if constexpr (kFirstStep) {
      b = d;
    } else {
      b = *buf * s.momentum + s.one_minus_dampening * d;
    }
    *buf = b;
    if constexpr (kNesterov) {
      d = d + s.momentum * b;
    } else {
      d = b;
    }
  }
  param = param + s.neg_lr * d;
}

enum class WeightDecay { None, L2, Decoupled };

inline WeightDecay weight_decay_kind(const AdamUpdateArgs& args) {
  return args.weight_decay == 0.0      ? WeightDecay::None
         : args.decoupled_weight_decay ? WeightDecay::Decoupled
                                       : WeightDecay::L2;
}

template <typename T>
struct AdamScalars {
  T sign, weight_decay, decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2;
  T neg_step_size, bias_correction2_sqrt, eps;
  // Computed in double on the host, as PyTorch computes them in Python before casting to T.
  static AdamScalars make(const AdamUpdateArgs& args) {
    const double step = static_cast<double>(args.step);
    const double bias_correction1 = 1.0 - std::pow(args.beta1, step);
    const double bias_correction2 = 1.0 - std::pow(args.beta2, step);
    const double step_size = args.lr / bias_correction1;
    return {args.maximize ? T(-1) : T(1),
            T(args.weight_decay),
            T(1.0 - args.lr * args.weight_decay),
            T(args.beta1),
            T(1.0 - args.beta1),
            T(args.beta2),
            T(1.0 - args.beta2),
            T(-step_size),
            T(std::sqrt(bias_correction2)),
            T(args.eps)};
  }
};

// torch.maximum: NaN in either operand gives NaN.
template <typename T>
EMBER_HOST_DEVICE inline T nan_maximum(T a, T b) {
  return (a != a || a > b) ? a : b;
}

template <typename T, WeightDecay kDecay, bool kAmsgrad>
EMBER_HOST_DEVICE inline void adam_element(T& param, T grad, T& exp_avg, T& exp_avg_sq, T* max_exp_avg_sq,
                                           const AdamScalars<T>& s) {
  T g = grad * s.sign;
  T p = param;
  if constexpr (kDecay == WeightDecay::L2) g = g + s.weight_decay * p;
  if constexpr (kDecay == WeightDecay::Decoupled) p = p * s.decay_factor;
  const T m = exp_avg * s.beta1 + s.one_minus_beta1 * g;
  T v = exp_avg_sq * s.beta2 + s.one_minus_beta2 * g * g;
  exp_avg = m;
  exp_avg_sq = v;
  if constexpr (kAmsgrad) {
    v = nan_maximum(*max_exp_avg_sq, v);
    *max_exp_avg_sq = v;
  }
  const T denom = libm::sqrt(v) / s.bias_correction2_sqrt + s.eps;
  param = p + s.neg_step_size * m / denom;
}

}  // namespace ember::formula
