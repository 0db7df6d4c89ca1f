// CPU fused optimizer updates (SGD, Adam/AdamW): one pass over param, grad and state, split by
// element ranges across the thread pool. Every operation rounds in the parameter's dtype, in the
// order of PyTorch's op-by-op single-tensor update.
#include <cmath>
#include <type_traits>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/thread_pool.h"

// Contracting a * b + c into an FMA (GCC does so across statements under -march=native) would skip
// a rounding the op-by-op update makes, and the result would no longer match it to the bit.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace ember::cpu {

namespace {

// Calls body(std::true_type) or body(std::false_type), turning a runtime flag into a template one so
// the inner loops carry no branches.
template <typename Body>
void with_flag(bool flag, const Body& body) {
  if (flag) {
    body(std::true_type{});
  } else {
    body(std::false_type{});
  }
}

template <typename Body>
void dispatch_float(DType dtype, const char* op, const Body& body) {
  switch (dtype) {
    case kFloat32: body(float{}); break;
    case kFloat64: body(double{}); break;
    default: detail::unsupported_dtype(op, dtype);
  }
}

// ---- SGD ----

template <typename T>
struct SgdScalars {
  T sign, weight_decay, momentum, one_minus_dampening, neg_lr;
};

template <typename T, bool kWeightDecay, bool kMomentum, bool kNesterov, bool kFirstStep>
void sgd_range(T* __restrict param, const T* __restrict grad, T* __restrict buf, int64_t n, SgdScalars<T> s) {
  for (int64_t i = 0; i < n; ++i) {
    T d = grad[i] * s.sign;  // exact: -grad when maximizing, grad otherwise
    if constexpr (kWeightDecay) d = d + s.weight_decay * param[i];
    if constexpr (kMomentum) {
      T b;
      if constexpr (kFirstStep) {
        b = d;
      } else {
        b = buf[i] * s.momentum + s.one_minus_dampening * d;
      }
      buf[i] = b;
      if constexpr (kNesterov) {
        d = d + s.momentum * b;
      } else {
        d = b;
      }
    }
    param[i] = param[i] + s.neg_lr * d;
  }
}

template <typename T>
void sgd_typed(const Tensor& param_t, const Tensor& grad_t, const Tensor& buf_t, const SgdUpdateArgs& args) {
  // Scalars are cast to T once, as PyTorch casts a Python float operand to the tensor's dtype.
  const SgdScalars<T> s{args.maximize ? T(-1) : T(1), T(args.weight_decay), T(args.momentum),
                        T(1.0 - args.dampening), T(-args.lr)};
  T* param = param_t.data_ptr<T>();
  const T* grad = grad_t.data_ptr<T>();
  const bool use_momentum = args.momentum != 0.0;
  T* buf = use_momentum ? buf_t.data_ptr<T>() : nullptr;
  with_flag(args.weight_decay != 0.0, [&](auto weight_decay) {
    with_flag(use_momentum, [&](auto momentum) {
      with_flag(use_momentum && args.nesterov, [&](auto nesterov) {
        with_flag(use_momentum && args.first_step, [&](auto first_step) {
          parallel_for(0, param_t.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
            sgd_range<T, decltype(weight_decay)::value, decltype(momentum)::value, decltype(nesterov)::value,
                      decltype(first_step)::value>(
                param + lo, grad + lo, buf ? buf + lo : nullptr, hi - lo, s);
          });
        });
      });
    });
  });
}

// ---- Adam / AdamW ----

enum class WeightDecay { None, L2, Decoupled };

template <typename T>
struct AdamScalars {
  T sign, weight_decay, decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2;
  T neg_step_size, bias_correction2_sqrt, eps;
};

// torch.maximum: NaN in either operand gives NaN.
template <typename T>
inline T maximum(T a, T b) {
  return (a != a || a > b) ? a : b;
}

template <typename T, WeightDecay kDecay, bool kAmsgrad>
void adam_range(T* __restrict param, const T* __restrict grad, T* __restrict exp_avg, T* __restrict exp_avg_sq,
                T* __restrict max_exp_avg_sq, int64_t n, AdamScalars<T> s) {
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i] * s.sign;
    T p = param[i];
    if constexpr (kDecay == WeightDecay::L2) g = g + s.weight_decay * p;
    if constexpr (kDecay == WeightDecay::Decoupled) p = p * s.decay_factor;
    const T m = exp_avg[i] * s.beta1 + s.one_minus_beta1 * g;
    T v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if constexpr (kAmsgrad) {
      v = maximum(max_exp_avg_sq[i], v);
      max_exp_avg_sq[i] = v;
    }
    const T denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    param[i] = p + s.neg_step_size * m / denom;
  }
}

template <typename T>
void adam_typed(const Tensor& param_t, const Tensor& grad_t, const Tensor& exp_avg_t, const Tensor& exp_avg_sq_t,
                const Tensor& max_t, const AdamUpdateArgs& args) {
  // Host-side scalars in double, as PyTorch computes them in Python before casting to T.
  const double step = static_cast<double>(args.step);
  const double bias_correction1 = 1.0 - std::pow(args.beta1, step);
  const double bias_correction2 = 1.0 - std::pow(args.beta2, step);
  const double step_size = args.lr / bias_correction1;
  const AdamScalars<T> s{args.maximize ? T(-1) : T(1),
                         T(args.weight_decay),
                         T(1.0 - args.lr * args.weight_decay),
                         T(args.beta1),
                         T(1.0 - args.beta1),
                         T(args.beta2),
                         T(1.0 - args.beta2),
                         T(-step_size),
                         T(std::sqrt(bias_correction2)),
                         T(args.eps)};
  const WeightDecay decay = args.weight_decay == 0.0 ? WeightDecay::None
                            : args.decoupled_weight_decay ? WeightDecay::Decoupled
                                                          : WeightDecay::L2;
  T* param = param_t.data_ptr<T>();
  const T* grad = grad_t.data_ptr<T>();
  T* exp_avg = exp_avg_t.data_ptr<T>();
  T* exp_avg_sq = exp_avg_sq_t.data_ptr<T>();
  T* max_exp_avg_sq = args.amsgrad ? max_t.data_ptr<T>() : nullptr;
  auto run = [&](auto decay_tag) {
    with_flag(args.amsgrad, [&](auto amsgrad) {
      parallel_for(0, param_t.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
        adam_range<T, decltype(decay_tag)::value, decltype(amsgrad)::value>(
            param + lo, grad + lo, exp_avg + lo, exp_avg_sq + lo, max_exp_avg_sq ? max_exp_avg_sq + lo : nullptr,
            hi - lo, s);
      });
    });
  };
  switch (decay) {
    case WeightDecay::None: run(std::integral_constant<WeightDecay, WeightDecay::None>{}); break;
    case WeightDecay::L2: run(std::integral_constant<WeightDecay, WeightDecay::L2>{}); break;
    case WeightDecay::Decoupled: run(std::integral_constant<WeightDecay, WeightDecay::Decoupled>{}); break;
  }
}

}  // namespace

void sgd_update_kernel(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                       const SgdUpdateArgs& args) {
  dispatch_float(param.dtype(), "fused_sgd_update_", [&](auto tag) {
    sgd_typed<decltype(tag)>(param, grad, momentum_buffer, args);
  });
}

void adam_update_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamUpdateArgs& args) {
  dispatch_float(param.dtype(), "fused_adam_update_", [&](auto tag) {
    adam_typed<decltype(tag)>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
  });
}

}  // namespace ember::cpu
