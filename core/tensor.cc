// TensorImpl bookkeeping, metadata accessors, CPU data access and the autograd-facing members.
#include "core/tensor.h"

#include <mutex>

#include "core/autograd_hooks.h"
#include "core/device_check.h"
#include "core/grad_mode.h"
#include "core/shared_memory.h"

namespace ember {

namespace {
AutogradHooks* installed_hooks = nullptr;
}

void set_autograd_hooks(AutogradHooks* hooks) { installed_hooks = hooks; }
AutogradHooks* autograd_hooks() { return installed_hooks; }

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (installed_hooks == nullptr || !GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (any_requires_grad(*t)) return true;
  return false;
}

TensorImpl::TensorImpl(Storage storage_in, Shape sizes_in, Shape strides_in, int64_t offset_in, DType dtype_in)
    : sizes(std::move(sizes_in)),
      strides(std::move(strides_in)),
      offset(offset_in),
      dtype(dtype_in),
      storage(std::move(storage_in)) {
  refresh();
}

TensorImpl::~TensorImpl() = default;

void TensorImpl::refresh() {
  numel = shape_numel(sizes);
  contiguous = true;
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) {
      contiguous = false;
      break;
    }
    expected *= sizes[d];
  }
  if (numel == 0) contiguous = true;
}

int64_t Tensor::size(int64_t dim) const { return impl().sizes[wrap_dim(dim, this->dim(), "size")]; }
int64_t Tensor::stride(int64_t dim) const { return impl().strides[wrap_dim(dim, this->dim(), "stride")]; }

void* Tensor::data_ptr() const {
  const TensorImpl& i = impl();
  EMBER_CHECK(!i.storage->released(), "data_ptr: this tensor's storage (", i.storage->nbytes(), " bytes on ",
              i.storage->device().str(), ", shape ", shape_str(i.sizes),
              ") was released: a fully sharded parameter used outside its unit's forward and backward (call the "
              "unit through its holder or a container, so that its hooks gather it)");
  return static_cast<char*>(i.storage->data()) + i.offset * static_cast<int64_t>(ember::element_size(i.dtype));
}

template <typename T>
T Tensor::item() const {
  EMBER_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ", shape_str(sizes()));
  Tensor host = device().is_cpu() ? *this : cpu();
  T result{};
  EMBER_DISPATCH_ALL(host.dtype(), "item",
                     [&] { result = Scalar(*static_cast<const scalar_t*>(host.data_ptr())).template to<T>(); });
  return result;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = to(Device(kCPU)).to(dtype_of<T>()).contiguous();
  const T* data = static_cast<const T*>(host.data_ptr());
  return std::vector<T>(data, data + host.numel());
}

#define EMBER_INSTANTIATE_ACCESS(T)   \
  template T Tensor::item<T>() const; \
  template std::vector<T> Tensor::to_vector<T>() const;
EMBER_INSTANTIATE_ACCESS(float)
EMBER_INSTANTIATE_ACCESS(double)
EMBER_INSTANTIATE_ACCESS(BFloat16)
EMBER_INSTANTIATE_ACCESS(Half)
EMBER_INSTANTIATE_ACCESS(int64_t)
EMBER_INSTANTIATE_ACCESS(int32_t)
EMBER_INSTANTIATE_ACCESS(uint8_t)
EMBER_INSTANTIATE_ACCESS(bool)
#undef EMBER_INSTANTIATE_ACCESS

const Tensor& Tensor::share_memory_() const {
  shm::move_to_shared(*impl().storage, "share_memory_");
  return *this;
}

bool Tensor::is_shared() const { return impl().storage->shared_segment() != nullptr; }

Tensor Tensor::detach() const {
  const TensorImpl& i = impl();
  // Shares storage (and so the version counter) but is not a differentiable view.
  return Tensor(std::make_shared<TensorImpl>(i.storage, i.sizes, i.strides, i.offset, i.dtype));
}

namespace {
// Storage, geometry, dtype and view flag: what set_data and become take from the other tensor.
void take_data(TensorImpl& i, const TensorImpl& o) {
  i.storage = o.storage;
  i.sizes = o.sizes;
  i.strides = o.strides;
  i.offset = o.offset;
  i.dtype = o.dtype;
  i.is_view = o.is_view;
  i.refresh();
}
}  // namespace

void Tensor::set_data(const Tensor& data) const {
  EMBER_CHECK(is_leaf(), "set_data: only leaf tensors (parameters, buffers) can have their data replaced");
  EMBER_CHECK(data.defined(), "set_data: the new data is undefined");
  TensorImpl& i = impl();
  const TensorImpl& o = *data.impl_;
  bool same_kind = i.dtype == o.dtype && i.sizes == o.sizes && i.storage->device() == o.storage->device();
  take_data(i, o);
  i.is_view = false;
  if (!same_kind && i.autograd) i.autograd->grad = Tensor();
}

void Tensor::rebind_with_history(const Tensor& source) const {
  EMBER_CHECK(source.defined(), "rebind_with_history: the source tensor is undefined");
  TensorImpl& i = impl();
  const TensorImpl& o = *source.impl_;
  if (&i == &o) return;
  take_data(i, o);
  const AutogradMeta* from = o.autograd.get();
  if (from == nullptr && i.autograd == nullptr) return;
  auto meta = std::make_unique<AutogradMeta>();
  if (from != nullptr) {
    meta->requires_grad = from->requires_grad;
    meta->grad_fn = from->grad_fn;
    meta->output_nr = from->output_nr;
  }
  i.autograd = std::move(meta);
}

// ---- autograd state ----

AutogradMeta& Tensor::autograd_meta() const {
  TensorImpl& i = impl();
  if (!i.autograd) i.autograd = std::make_unique<AutogradMeta>();
  return *i.autograd;
}

bool Tensor::requires_grad() const {
  const AutogradMeta* meta = impl().autograd.get();
  return meta != nullptr && (meta->requires_grad || meta->grad_fn != nullptr);
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  AutogradMeta* meta = impl().autograd.get();
  if (meta != nullptr && meta->grad_fn != nullptr) {
    EMBER_CHECK(requires_grad,
                "requires_grad_: you can only change requires_grad flags of leaf tensors; this "
                "tensor was produced by an op (use detach() to get a leaf)");
    return *this;
  }
  EMBER_CHECK(!requires_grad || is_floating(dtype()),
              "requires_grad_: only floating-point tensors can require "
              "gradients, got dtype ",
              dtype_name(dtype()));
  autograd_meta().requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const {
  const AutogradMeta* meta = impl().autograd.get();
  return meta == nullptr || meta->grad_fn == nullptr;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  const AutogradMeta* meta = impl().autograd.get();
  return meta ? meta->grad : undefined;
}

Tensor& Tensor::mutable_grad() const { return autograd_meta().grad; }

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined()) {
    check_devices("set_grad", device(), {{grad, "grad"}});
    EMBER_CHECK(grad.sizes() == sizes(), "set_grad: expected a gradient of shape ", shape_str(sizes()), ", got ",
                shape_str(grad.sizes()));
    EMBER_CHECK(grad.dtype() == dtype(), "set_grad: expected a gradient of dtype ", dtype_name(dtype()), ", got ",
                dtype_name(grad.dtype()));
  }
  autograd_meta().grad = grad;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  const AutogradMeta* meta = impl().autograd.get();
  return meta ? meta->grad_fn : none;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  AutogradHooks* hooks = autograd_hooks();
  EMBER_CHECK(hooks != nullptr, "backward: the autograd library is not linked into this program");
  EMBER_CHECK(requires_grad(), "backward: element 0 of tensors does not require grad and does not have a grad_fn");
  hooks->backward(*this, gradient, retain_graph);
}

size_t Tensor::register_hook(TensorHook hook) const {
  EMBER_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  if (!is_leaf()) {
    // The hook must outlive this handle: it lives on the grad_fn that produces the gradient.
    AutogradHooks* hooks = autograd_hooks();
    EMBER_CHECK(hooks != nullptr, "register_hook: the autograd library is not linked into this program");
    return hooks->register_hook(*this, std::move(hook));
  }
  AutogradMeta& meta = autograd_meta();
  size_t id = meta.next_hook_id++;
  meta.hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_hook(size_t handle) const {
  if (!is_leaf() && autograd_hooks() != nullptr) autograd_hooks()->remove_hook(*this, handle);
  AutogradMeta& meta = autograd_meta();
  std::erase_if(meta.hooks, [&](const auto& entry) { return entry.first == handle; });
  std::erase_if(meta.post_accumulate_hooks, [&](const auto& entry) { return entry.first == handle; });
}

size_t Tensor::register_post_accumulate_grad_hook(PostAccumulateHook hook) const {
  EMBER_CHECK(requires_grad() && is_leaf(),
              "register_post_accumulate_grad_hook: post accumulate grad hooks can only be registered on leaf "
              "tensors that require grad");
  AutogradMeta& meta = autograd_meta();
  size_t id = meta.next_hook_id++;
  meta.post_accumulate_hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::retain_grad() const {
  EMBER_CHECK(requires_grad(), "retain_grad: can't retain_grad on a tensor that doesn't require gradient");
  if (is_leaf() || retains_grad()) return;  // leaves keep their grad anyway
  AutogradHooks* hooks = autograd_hooks();
  EMBER_CHECK(hooks != nullptr, "retain_grad: the autograd library is not linked into this program");
  hooks->retain_grad(*this);
  autograd_meta().retains_grad = true;
}

bool Tensor::retains_grad() const {
  const AutogradMeta* meta = impl().autograd.get();
  return meta != nullptr && meta->retains_grad;
}

}  // namespace ember
