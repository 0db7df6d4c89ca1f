// Automatic mixed precision: PyTorch's torch.autocast for Ember. Inside an AutocastGuard for a
// device type, the ops in EMBER_AUTOCAST_OPS below run on inputs cast to the policy's dtype:
// convolutions and matrix products in the lower precision (bfloat16 or float16), losses and (on
// CUDA) the numerically touchy ops in float32. Every other op runs in the dtypes it is given, and
// ops that combine inputs compute in the widest of them by the ordinary promotion rules.
//
//   {
//     ember::AutocastGuard autocast(ember::kCPU, ember::kBFloat16);
//     Tensor loss = ember::cross_entropy(model->forward(x), y);  // convs in bf16, loss in float32
//   }
//   loss.backward();  // float32 parameters get float32 gradients
//
// State is per thread and per device type; guards nest, and the cache of cast weights (each
// float32 leaf that requires grad is cast once, not once per use) is cleared when the outermost
// enabled guard of the thread exits, as PyTorch does. Only tensors of the guard's device type
// whose dtype is a floating type other than float64 are cast; in-place ops are never cast, and the
// ops run inside a policy (and every backward) see autocast off.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace ember {

class AutocastGuard {
 public:
  // Raises when `dtype` is not one `device_type` can autocast to: bfloat16 on the CPU; float16
  // or bfloat16 on CUDA.
  AutocastGuard(DeviceType device_type, DType dtype, bool enabled = true);
  // PyTorch's defaults: bfloat16 on the CPU, float16 on CUDA.
  explicit AutocastGuard(DeviceType device_type, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_type_;
  bool previous_enabled_;
  DType previous_dtype_;
};

bool is_autocast_enabled(DeviceType device_type);
DType autocast_dtype(DeviceType device_type);  // the lower precision the guard names
DType default_autocast_dtype(DeviceType device_type);
void clear_autocast_cache();

namespace autocast {

// LowerPrecision: floating inputs to the guard's dtype. Float32: to float32. Promote: to the
// widest floating type among the inputs (and at least the lower precision).
enum class Policy : uint8_t { None, LowerPrecision, Float32, Promote };
const char* policy_name(Policy policy);  // "lower_precision_fp", "fp32", "promote", "none"

// The one table of what autocast does to which op: PyTorch's op name, then the policy on the CPU
// and on CUDA, those of PyTorch 2.15's autocast (ATen/autocast_mode.h for CUDA, AutocastCPU's
// registrations for the CPU; tests/autograd/autocast_policy.txt, checked by
// tests/autograd:autocast_test). Ops absent from it run in the dtypes they are given.
#define EMBER_AUTOCAST_OPS(X)                           \
  X(conv2d, LowerPrecision, LowerPrecision)             \
  X(linear, LowerPrecision, LowerPrecision)             \
  X(matmul, LowerPrecision, LowerPrecision)             \
  X(mm, LowerPrecision, LowerPrecision)                 \
  X(bmm, LowerPrecision, LowerPrecision)                \
  X(cross_entropy, Float32, Float32)                    \
  X(nll_loss, Float32, Float32)                         \
  X(mse_loss, Float32, Float32)                         \
  X(binary_cross_entropy_with_logits, Float32, Float32) \
  X(prod, Float32, Float32)                             \
  X(exp, None, Float32)                                 \
  X(expm1, None, Float32)                               \
  X(log, None, Float32)                                 \
  X(log1p, None, Float32)                               \
  X(reciprocal, None, Float32)                          \
  X(rsqrt, None, Float32)                               \
  X(pow, None, Float32)                                 \
  X(softmax, None, Float32)                             \
  X(log_softmax, None, Float32)                         \
  X(layer_norm, None, Float32)                          \
  X(logsumexp, None, Float32)                           \
  X(sum, None, Float32)                                 \
  X(norm, None, Float32)                                \
  X(scatter_add, None, Promote)

enum class Op : uint8_t {
#define EMBER_AUTOCAST_ENUM(name, cpu, cuda) name,
  EMBER_AUTOCAST_OPS(EMBER_AUTOCAST_ENUM)
#undef EMBER_AUTOCAST_ENUM
};

struct OpPolicy {
  const char* name;
  Policy cpu;
  Policy cuda;
};
const std::vector<OpPolicy>& policy_table();
Policy policy(Op op, DeviceType device_type);

// How many casts this thread's cache holds (for tests and diagnostics).
size_t cached_casts();

namespace detail {
struct ThreadState {
  bool enabled[kNumDeviceTypes] = {false, false};
  DType dtype[kNumDeviceTypes] = {kBFloat16, kFloat16};
  int enabled_count = 0;  // device types enabled
  int nesting = 0;        // enabled guards alive
  int held = 0;           // Hold guards alive
};
ThreadState& thread_state();
}  // namespace detail

// True when some device type has autocast on in this thread and no Hold is in force: the one
// check an op makes before looking further.
inline bool active() {
  const detail::ThreadState& s = detail::thread_state();
  return s.enabled_count > 0 && s.held == 0;
}

// Autocast off for the scope: an op's internals after its policy applied, a composite op that
// PyTorch runs as one kernel, an in-place op, a backward pass.
class Hold {
 public:
  Hold() { ++detail::thread_state().held; }
  ~Hold() { --detail::thread_state().held; }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
};

// Applies `op`'s policy to its tensor inputs. When it changes anything, the Scope is true, holds
// the cast inputs (in order) and keeps autocast off while it lives, so the op re-enters itself
// with them:
//   if (autocast::Scope cast{autocast::Op::mm, {&a, &b}}) return mm(cast[0], cast[1]);
class Scope {
 public:
  Scope(Op op, std::initializer_list<const Tensor*> inputs);
  Scope(Op op, const std::vector<Tensor>& inputs);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  explicit operator bool() const { return applied_; }
  const Tensor& operator[](size_t i) const { return cast_[i]; }
  const std::vector<Tensor>& tensors() const { return cast_; }

 private:
  void apply(Op op, const std::vector<const Tensor*>& inputs);
  bool applied_ = false;
  std::vector<Tensor> cast_;
};

// What a thread's autocast state is, for the threads that run a caller's work (DataParallel's
// replicas, pipeline stages): captured where the work is issued, installed where it runs.
struct State {
  bool enabled[kNumDeviceTypes] = {false, false};
  DType dtype[kNumDeviceTypes] = {kBFloat16, kFloat16};
};
State capture();
class StateGuard {
 public:
  explicit StateGuard(const State& state);
  ~StateGuard();
  StateGuard(const StateGuard&) = delete;
  StateGuard& operator=(const StateGuard&) = delete;

 private:
  detail::ThreadState previous_;
};

}  // namespace autocast

}  // namespace ember
