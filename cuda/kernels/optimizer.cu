// Fused optimizer kernels: a thread per element, the update's flags fixed per kernel. Built
// without FMA contraction (GCC's fp-contract=off here; nvcc's --fmad=false in BUILD), so that
// each element matches the op-by-op update to the bit, as the CPU kernel does.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "core/optimizer_math.h"
#include "cuda/kernels/loops.cuh"
#include "cuda/kernels/entries.h"

namespace ember::cuda {

namespace {

using formula::AdamScalars;
using formula::SgdScalars;
using formula::WeightDecay;

template <typename T, bool kWeightDecay, bool kMomentum, bool kNesterov, bool kFirstStep>
__global__ void __launch_bounds__(kBlockThreads)
    sgd_kernel(T* param, const T* grad, T* buf, int64_t n, SgdScalars<T> s) {
  for (const int64_t i : grid_stride(n))
    formula::sgd_element<T, kWeightDecay, kMomentum, kNesterov, kFirstStep>(param[i], grad[i],
                                                                            kMomentum ? buf + i : nullptr, s);
}

template <typename T, WeightDecay kDecay, bool kAmsgrad>
__global__ void __launch_bounds__(kBlockThreads)
    adam_kernel(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq, int64_t n, AdamScalars<T> s) {
  for (const int64_t i : grid_stride(n))
    formula::adam_element<T, kDecay, kAmsgrad>(param[i], grad[i], exp_avg[i], exp_avg_sq[i],
                                               kAmsgrad ? max_exp_avg_sq + i : nullptr, s);
}

template <typename T, bool kWeightDecay, bool kMomentum, bool kNesterov, bool kFirstStep>
void launch_sgd(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdUpdateArgs& args) {
  constexpr auto kernel = &sgd_kernel<T, kWeightDecay, kMomentum, kNesterov, kFirstStep>;
  const int64_t n = param.numel();
  EMBER_LAUNCH(kernel, dim3(grid_for(n)), dim3(kBlockThreads), 0, current_stream().handle(), param.data_ptr<T>(),
               grad.data_ptr<T>(), kMomentum ? buf.data_ptr<T>() : static_cast<T*>(nullptr), n,
               SgdScalars<T>::make(args));
}

template <typename T>
void sgd_typed(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdUpdateArgs& args) {
  const bool wd = args.weight_decay != 0.0, momentum = args.momentum != 0.0;
  if (!momentum) {
    if (wd)
      launch_sgd<T, true, false, false, false>(param, grad, buf, args);
    else
      launch_sgd<T, false, false, false, false>(param, grad, buf, args);
    return;
  }
  const int variant = (wd ? 4 : 0) | (args.nesterov ? 2 : 0) | (args.first_step ? 1 : 0);
  switch (variant) {
    case 0:
      return launch_sgd<T, false, true, false, false>(param, grad, buf, args);
    case 1:
      return launch_sgd<T, false, true, false, true>(param, grad, buf, args);
    case 2:
      return launch_sgd<T, false, true, true, false>(param, grad, buf, args);
    case 3:
      return launch_sgd<T, false, true, true, true>(param, grad, buf, args);
    case 4:
      return launch_sgd<T, true, true, false, false>(param, grad, buf, args);
    case 5:
      return launch_sgd<T, true, true, false, true>(param, grad, buf, args);
    case 6:
      return launch_sgd<T, true, true, true, false>(param, grad, buf, args);
    default:
      return launch_sgd<T, true, true, true, true>(param, grad, buf, args);
  }
}

template <typename T, WeightDecay kDecay, bool kAmsgrad>
void launch_adam(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const Tensor& vmax,
                 const AdamUpdateArgs& args) {
  constexpr auto kernel = &adam_kernel<T, kDecay, kAmsgrad>;
  const int64_t n = param.numel();
  EMBER_LAUNCH(kernel, dim3(grid_for(n)), dim3(kBlockThreads), 0, current_stream().handle(), param.data_ptr<T>(),
               grad.data_ptr<T>(), m.data_ptr<T>(), v.data_ptr<T>(),
               kAmsgrad ? vmax.data_ptr<T>() : static_cast<T*>(nullptr), n, AdamScalars<T>::make(args));
}

template <typename T, WeightDecay kDecay>
void adam_amsgrad(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const Tensor& vmax,
                  const AdamUpdateArgs& args) {
  if (args.amsgrad)
    launch_adam<T, kDecay, true>(param, grad, m, v, vmax, args);
  else
    launch_adam<T, kDecay, false>(param, grad, m, v, vmax, args);
}

template <typename T>
void adam_typed(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const Tensor& vmax,
                const AdamUpdateArgs& args) {
  switch (formula::weight_decay_kind(args)) {
    case WeightDecay::None:
      return adam_amsgrad<T, WeightDecay::None>(param, grad, m, v, vmax, args);
    case WeightDecay::L2:
      return adam_amsgrad<T, WeightDecay::L2>(param, grad, m, v, vmax, args);
    case WeightDecay::Decoupled:
      return adam_amsgrad<T, WeightDecay::Decoupled>(param, grad, m, v, vmax, args);
  }
}

}  // namespace

void sgd_update_kernel(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                       const SgdUpdateArgs& args) {
  if (param.numel() == 0) return;
  DeviceGuard guard(param.device().index);
  switch (param.dtype()) {
    case kFloat32:
      sgd_typed<float>(param, grad, momentum_buffer, args);
      break;
    case kFloat64:
      sgd_typed<double>(param, grad, momentum_buffer, args);
      break;
    default:
      detail::unsupported_dtype("fused_sgd_update_", param.dtype());
  }
  check_launch("fused_sgd_update_");
}

void adam_update_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamUpdateArgs& args) {
  if (param.numel() == 0) return;
  DeviceGuard guard(param.device().index);
  switch (param.dtype()) {
    case kFloat32:
      adam_typed<float>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
      break;
    case kFloat64:
      adam_typed<double>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
      break;
    default:
      detail::unsupported_dtype("fused_adam_update_", param.dtype());
  }
  check_launch("fused_adam_update_");
}

}  // namespace ember::cuda
