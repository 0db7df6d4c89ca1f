// CPU fused optimizer updates (SGD, Adam/AdamW): one pass over param, grad and state, split by
// element ranges across the thread pool. Every operation rounds in the parameter's dtype, in the
// order of PyTorch's op-by-op single-tensor update.
#include <cmath>
#include <type_traits>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/thread_pool.h"
#include "core/optimizer_math.h"

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
    case kFloat32:
      body(float{});
      break;
    case kFloat64:
      body(double{});
      break;
    default:
      detail::unsupported_dtype(op, dtype);
  }
}

// ---- SGD ----

using formula::AdamScalars;
using formula::SgdScalars;
using formula::WeightDecay;

template <typename T, bool kWeightDecay, bool kMomentum, bool kNesterov, bool kFirstStep>
void sgd_range(T* __restrict param, const T* __restrict grad, T* __restrict buf, int64_t n, SgdScalars<T> s) {
  for (int64_t i = 0; i < n; ++i)
    formula::sgd_element<T, kWeightDecay, kMomentum, kNesterov, kFirstStep>(param[i], grad[i], buf ? buf + i : nullptr,
                                                                            s);
}

template <typename T>
void sgd_typed(const Tensor& param_t, const Tensor& grad_t, const Tensor& buf_t, const SgdUpdateArgs& args) {
  const SgdScalars<T> s = SgdScalars<T>::make(args);
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
                      decltype(first_step)::value>(param + lo, grad + lo, buf ? buf + lo : nullptr, hi - lo, s);
          });
        });
      });
    });
  });
}

// ---- Adam / AdamW ----

template <typename T, WeightDecay kDecay, bool kAmsgrad>
void adam_range(T* __restrict param, const T* __restrict grad, T* __restrict exp_avg, T* __restrict exp_avg_sq,
                T* __restrict max_exp_avg_sq, int64_t n, AdamScalars<T> s) {
  for (int64_t i = 0; i < n; ++i)
    formula::adam_element<T, kDecay, kAmsgrad>(param[i], grad[i], exp_avg[i], exp_avg_sq[i],
                                               max_exp_avg_sq ? max_exp_avg_sq + i : nullptr, s);
}

template <typename T>
void adam_typed(const Tensor& param_t, const Tensor& grad_t, const Tensor& exp_avg_t, const Tensor& exp_avg_sq_t,
                const Tensor& max_t, const AdamUpdateArgs& args) {
  const AdamScalars<T> s = AdamScalars<T>::make(args);
  const WeightDecay decay = formula::weight_decay_kind(args);
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
    case WeightDecay::None:
      run(std::integral_constant<WeightDecay, WeightDecay::None>{});
      break;
    case WeightDecay::L2:
      run(std::integral_constant<WeightDecay, WeightDecay::L2>{});
      break;
    case WeightDecay::Decoupled:
      run(std::integral_constant<WeightDecay, WeightDecay::Decoupled>{});
      break;
  }
}

}  // namespace

void sgd_update_kernel(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                       const SgdUpdateArgs& args) {
  dispatch_float(param.dtype(), "fused_sgd_update_",
                 [&](auto tag) { sgd_typed<decltype(tag)>(param, grad, momentum_buffer, args); });
}

void adam_update_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamUpdateArgs& args) {
  dispatch_float(param.dtype(), "fused_adam_update_",
                 [&](auto tag) { adam_typed<decltype(tag)>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args); });
}

}  // namespace ember::cpu
