// CPU amp_unscale: each grad in place, split by element ranges across the thread pool; a range
// that meets an inf or a NaN raises one shared flag, written to found_inf once at the end.
#include <atomic>

#include "core/amp_unscale_math.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/thread_pool.h"

namespace ember::cpu {

namespace {

template <typename T>
bool unscale_range(T* __restrict data, int64_t n, float inv_scale) {
  bool non_finite = false;
  for (int64_t i = 0; i < n; ++i) data[i] = formula::unscale_element(data[i], inv_scale, non_finite);
  return non_finite;
}

// A dense grad's elements fill one block from its data pointer, in whatever order its strides
// give: the order does not matter to an elementwise update.
template <typename T>
bool unscale_grad(const Tensor& grad, float inv_scale) {
  T* data = static_cast<T*>(grad.data_ptr());
  std::atomic<bool> found{false};
  parallel_for(0, grad.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    if (unscale_range(data + lo, hi - lo, inv_scale)) found.store(true, std::memory_order_relaxed);
  });
  return found.load(std::memory_order_relaxed);
}

}  // namespace

void amp_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf) {
  const float inv = *static_cast<const float*>(inv_scale.data_ptr());
  bool found = false;
  for (const Tensor& grad : grads) {
    switch (grad.dtype()) {
      case kFloat32:
        found |= unscale_grad<float>(grad, inv);
        break;
      case kFloat64:
        found |= unscale_grad<double>(grad, inv);
        break;
      case kBFloat16:
        found |= unscale_grad<BFloat16>(grad, inv);
        break;
      case kFloat16:
        found |= unscale_grad<Half>(grad, inv);
        break;
      default:
        detail::unsupported_dtype("amp_unscale_", grad.dtype());
    }
  }
  if (found) *static_cast<float*>(found_inf.data_ptr()) = 1.0f;
}

}  // namespace ember::cpu
