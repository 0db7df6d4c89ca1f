// The compute table: the kernels a backend implements for one device type, each declared once in
// core/kernel_entries.inc. core calls only these; the CPU backend (core/cpu) and the CUDA backend
// (cuda/) register themselves at start-up, so core never includes a backend header. Memory,
// copies and streams are the device runtime's (core/runtime.h).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/conv_params.h"
#include "core/device.h"
#include "core/loop.h"
#include "core/op_kinds.h"
#include "core/random_math.h"
#include "core/runtime.h"
#include "core/scalar.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace ember {

// Row-major C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] for b in [0, batch), on `device`.
struct GemmArgs {
  Device device;
  DType dtype = kFloat32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1.0, beta = 0.0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // in elements
};

// Pooling geometry; out_h/out_w are resolved by the op (ceil_mode applied) before the kernel runs.
struct PoolParams {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool count_include_pad = true;  // avg pooling: divide by the full window
  int64_t out_h = 0, out_w = 0;
};

// Fused SGD update of one parameter: PyTorch's single-tensor SGD step, every operation rounded in
// the parameter's dtype exactly as the op-by-op version rounds it.
//   d = (maximize ? -grad : grad) + weight_decay * param          (the second term only when wd != 0)
//   momentum != 0:  buf = first_step ? d : momentum * buf + (1 - dampening) * d
//                   d = nesterov ? d + momentum * buf : buf
//   param += -lr * d
struct SgdUpdateArgs {
  double lr = 0.0, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false, maximize = false;
  bool first_step = false;  // the momentum buffer holds no history yet and is set to d
};

// Fused Adam / AdamW update of one parameter (PyTorch's single-tensor step). `step` counts this
// update too (1 on the first), and sets the bias corrections 1 - beta^step.
//   g = maximize ? -grad : grad;  Adam: g += weight_decay * param;  AdamW: param *= 1 - lr * weight_decay
//   exp_avg = beta1 * exp_avg + (1 - beta1) * g;  exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
//   amsgrad: max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq), used in place of exp_avg_sq below
//   param += -lr / (1 - beta1^step) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps)
struct AdamUpdateArgs {
  double lr = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;
  bool decoupled_weight_decay = false;  // AdamW
  bool amsgrad = false, maximize = false;
};

using TensorPair = std::pair<Tensor, Tensor>;

// An entry a backend left empty raises one error, naming the entry and the device and dtype of
// its first tensor-like argument.
namespace kernel_detail {

struct Site {
  Device device;
  DType dtype = kFloat32;
  bool has_device = false, has_dtype = false;
};
inline void note(Site& s, const Tensor& t) {
  if (!t.defined()) return;
  if (!s.has_device) s.device = t.device(), s.has_device = true;
  if (!s.has_dtype) s.dtype = t.dtype(), s.has_dtype = true;
}
inline void note(Site& s, const StridedLoop& l) {
  if (!s.has_device) s.device = l.device, s.has_device = true;
  if (!s.has_dtype) s.dtype = l.dtypes[0], s.has_dtype = true;
}
inline void note(Site& s, const ReduceLoop& l) {
  if (!s.has_device) s.device = l.device, s.has_device = true;
  if (!s.has_dtype) s.dtype = l.in_dtype, s.has_dtype = true;
}
inline void note(Site& s, const GemmArgs& a) {
  if (!s.has_device) s.device = a.device, s.has_device = true;
  if (!s.has_dtype) s.dtype = a.dtype, s.has_dtype = true;
}
inline void note(Site& s, const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) note(s, t);
}
inline void note(Site& s, Device d) {
  if (!s.has_device) s.device = d, s.has_device = true;
}
inline void note(Site& s, DType t) {
  if (!s.has_dtype) s.dtype = t, s.has_dtype = true;
}
template <class T>
void note(Site&, const T&) {}

[[noreturn]] void throw_missing(const char* entry, const Site& site);

template <class Signature>
struct Missing;
template <class R, class... Args>
struct Missing<R(Args...)> {
  template <const char* Name>
  static R call(Args... args) {
    Site site;
    (note(site, args), ...);
    throw_missing(Name, site);
  }
};

#define EMBER_KERNEL(name, result, params) inline constexpr char name##_name[] = #name;
#include "core/kernel_entries.inc"
#undef EMBER_KERNEL

}  // namespace kernel_detail

struct KernelTable {
  const char* name = "?";
#define EMBER_KERNEL(name, result, params) \
  result(*name) params = &kernel_detail::Missing<result params>::template call<kernel_detail::name##_name>;
#include "core/kernel_entries.inc"
#undef EMBER_KERNEL
};

// A backend declares its entries, `name_kernel` in its own namespace, with
//   #define EMBER_KERNEL(name, result, params) result name##_kernel params;
//   #include "core/kernel_entries.inc"
// and registers those it serves, `table.name = &name_kernel;` each (one include registers all).

void register_kernels(DeviceType type, const KernelTable* table);
// The table for `device`, or an Error naming `op` when no backend is registered for it or the
// device does not exist.
const KernelTable& kernels_for(Device device, const char* op);
// The registered table for `type`, or null.
const KernelTable* find_kernels(DeviceType type);

}  // namespace ember
