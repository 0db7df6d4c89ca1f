// Autocast's thread-local state, its policy table and the per-thread cache of cast weights.
#include "core/autocast.h"

#include <string>
#include <unordered_map>

#include "core/error.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember {

namespace autocast {

namespace detail {
ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}
}  // namespace detail

namespace {

int index_of(DeviceType type) { return static_cast<int>(type); }

// Keyed by the source's TensorImpl, which the entry keeps alive so that its address cannot be
// reused by another tensor while cached. The source's version at the cast tells a weight updated in
// place inside the guard (an optimizer step under autocast) from the one that was cast.
struct CacheEntry {
  Tensor source;
  uint32_t version;
  Tensor cast;
};
std::unordered_map<const TensorImpl*, CacheEntry>& cache() {
  thread_local std::unordered_map<const TensorImpl*, CacheEntry> entries;
  return entries;
}

bool eligible(const Tensor& t, DeviceType type) {
  return t.defined() && t.device().type == type && is_floating(t.dtype()) && t.dtype() != kFloat64;
}

// PyTorch caches the lower-precision casts of float32 leaves that require grad (the weights), and
// so does Ember; only while recording, so that a cast made under NoGradGuard, which carries no
// history, is never handed to a forward that must reach the weight.
Tensor cast_to(const Tensor& t, DType to, DeviceType type) {
  if (!eligible(t, type) || t.dtype() == to) return t;
  const DType lower = detail::thread_state().dtype[index_of(type)];
  const bool cacheable = to == lower && t.dtype() == kFloat32 && t.requires_grad() && t.is_leaf() &&
                         !t.unsafe_impl()->is_view && GradMode::is_enabled();
  if (!cacheable) return to_dtype(t, to);
  auto& entries = cache();
  auto found = entries.find(t.unsafe_impl());
  if (found != entries.end() && found->second.version == t.version() && found->second.cast.dtype() == to)
    return found->second.cast;
  Tensor cast = to_dtype(t, to);
  entries[t.unsafe_impl()] = CacheEntry{t, t.version(), cast};
  return cast;
}

}  // namespace

const char* policy_name(Policy policy) {
  switch (policy) {
    case Policy::LowerPrecision:
      return "lower_precision_fp";
    case Policy::Float32:
      return "fp32";
    case Policy::Promote:
      return "promote";
    case Policy::None:
      return "none";
  }
  return "?";
}

const std::vector<OpPolicy>& policy_table() {
  static const std::vector<OpPolicy> table = {
#define EMBER_AUTOCAST_ROW(name, cpu, cuda) {#name, Policy::cpu, Policy::cuda},
      EMBER_AUTOCAST_OPS(EMBER_AUTOCAST_ROW)
#undef EMBER_AUTOCAST_ROW
  };
  return table;
}

Policy policy(Op op, DeviceType device_type) {
  const OpPolicy& row = policy_table()[static_cast<size_t>(op)];
  return device_type == kCUDA ? row.cuda : row.cpu;
}

Scope::Scope(Op op, std::initializer_list<const Tensor*> inputs) {
  if (!active()) return;
  apply(op, std::vector<const Tensor*>(inputs));
}

Scope::Scope(Op op, const std::vector<Tensor>& inputs) {
  if (!active()) return;
  std::vector<const Tensor*> pointers;
  pointers.reserve(inputs.size());
  for (const Tensor& t : inputs) pointers.push_back(&t);
  apply(op, pointers);
}

void Scope::apply(Op op, const std::vector<const Tensor*>& inputs) {
  // The op's device type is its first tensor's, as PyTorch's dispatch key would be.
  const Tensor* first = nullptr;
  for (const Tensor* t : inputs)
    if (t->defined()) {
      first = t;
      break;
    }
  if (first == nullptr) return;
  const DeviceType type = first->device().type;
  const detail::ThreadState& state = detail::thread_state();
  if (!state.enabled[index_of(type)]) return;
  const Policy rule = policy(op, type);
  if (rule == Policy::None) return;
  DType to = state.dtype[index_of(type)];
  if (rule == Policy::Float32) {
    to = kFloat32;
  } else if (rule == Policy::Promote) {
    for (const Tensor* t : inputs)
      if (eligible(*t, type)) to = promote_types(to, t->dtype());
  }
  bool changes = false;
  for (const Tensor* t : inputs) changes = changes || (eligible(*t, type) && t->dtype() != to);
  if (!changes) return;
  cast_.reserve(inputs.size());
  for (const Tensor* t : inputs) cast_.push_back(cast_to(*t, to, type));
  applied_ = true;
  ++detail::thread_state().held;
}

Scope::~Scope() {
  if (applied_) --detail::thread_state().held;
}

size_t cached_casts() { return cache().size(); }

State capture() {
  const detail::ThreadState& s = detail::thread_state();
  State state;
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    state.enabled[i] = s.enabled[i] && s.held == 0;  // work issued from a backward or an op's inside
    state.dtype[i] = s.dtype[i];
  }
  return state;
}

StateGuard::StateGuard(const State& state) : previous_(detail::thread_state()) {
  detail::ThreadState& s = detail::thread_state();
  s.enabled_count = 0;
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    s.enabled[i] = state.enabled[i];
    s.dtype[i] = state.dtype[i];
    s.enabled_count += state.enabled[i] ? 1 : 0;
  }
  if (s.enabled_count > 0) ++s.nesting;
  s.held = 0;
}

StateGuard::~StateGuard() {
  detail::ThreadState& s = detail::thread_state();
  const bool was_counted = s.enabled_count > 0;
  s = previous_;
  if (was_counted && s.nesting == 0) cache().clear();
}

}  // namespace autocast

namespace {

void check_autocast_dtype(DeviceType device_type, DType dtype) {
  const bool ok = device_type == kCPU ? dtype == kBFloat16 : (dtype == kFloat16 || dtype == kBFloat16);
  EMBER_CHECK(ok, "AutocastGuard: expected ", device_type == kCPU ? "bfloat16" : "float16 or bfloat16",
              " as the lower precision of autocast on ", device_type == kCPU ? "the CPU" : "CUDA", ", got ",
              dtype_name(dtype));
}

}  // namespace

AutocastGuard::AutocastGuard(DeviceType device_type, DType dtype, bool enabled) : device_type_(device_type) {
  if (enabled) check_autocast_dtype(device_type, dtype);
  autocast::detail::ThreadState& s = autocast::detail::thread_state();
  const int i = static_cast<int>(device_type);
  previous_enabled_ = s.enabled[i];
  previous_dtype_ = s.dtype[i];
  if (enabled) s.dtype[i] = dtype;
  if (enabled != s.enabled[i]) s.enabled_count += enabled ? 1 : -1;
  s.enabled[i] = enabled;
  if (enabled) ++s.nesting;
}

AutocastGuard::AutocastGuard(DeviceType device_type, bool enabled)
    : AutocastGuard(device_type, default_autocast_dtype(device_type), enabled) {}

AutocastGuard::~AutocastGuard() {
  autocast::detail::ThreadState& s = autocast::detail::thread_state();
  const int i = static_cast<int>(device_type_);
  const bool enabled = s.enabled[i];
  if (enabled) --s.nesting;
  if (enabled != previous_enabled_) s.enabled_count += previous_enabled_ ? 1 : -1;
  s.enabled[i] = previous_enabled_;
  s.dtype[i] = previous_dtype_;
  if (enabled && s.nesting == 0) clear_autocast_cache();
}

bool is_autocast_enabled(DeviceType device_type) {
  return autocast::detail::thread_state().enabled[static_cast<int>(device_type)];
}

DType autocast_dtype(DeviceType device_type) {
  return autocast::detail::thread_state().dtype[static_cast<int>(device_type)];
}

DType default_autocast_dtype(DeviceType device_type) { return device_type == kCPU ? kBFloat16 : kFloat16; }

void clear_autocast_cache() { autocast::cache().clear(); }

}  // namespace ember
