// Tensor: a cheap-to-copy handle to a shared TensorImpl (shape, strides, offset, dtype, device,
// storage, optional autograd metadata). Copying a Tensor never copies data.
//
//   Tensor x = ember::randn({4, 3});
//   Tensor y = x.t().matmul(x).relu();      // views and ops
//   std::cout << y.sum().item<float>();
//
// Ops record the autograd graph once the autograd library is linked (it installs AutogradHooks).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "core/storage.h"

namespace ember {

namespace autograd {
class Node;
}

class Tensor;
struct AutogradMeta;

struct TensorImpl {
  Shape sizes;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = kFloat32;
  Storage storage;
  std::unique_ptr<AutogradMeta> autograd;  // null until autograd state is first set
  int64_t numel = 0;
  bool contiguous = true;
  bool is_view = false;  // shares storage with another tensor created by a view op

  TensorImpl(Storage storage, Shape sizes, Shape strides, int64_t offset, DType dtype);
  ~TensorImpl();
  void refresh();  // recomputes numel and contiguous after sizes/strides change
};

class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType dtype) : dtype_(dtype) {}      // NOLINT: zeros({2}, kFloat64)
  TensorOptions(Device device) : device_(device) {}  // NOLINT
  TensorOptions(DeviceType type) : device_(type) {}  // NOLINT

  TensorOptions dtype(DType d) const {
    TensorOptions o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions device(Device d) const {
    TensorOptions o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r) const {
    TensorOptions o = *this;
    o.requires_grad_ = r;
    return o;
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  DType dtype_ = kFloat32;
  Device device_ = Device(kCPU);
  bool requires_grad_ = false;
};

using TensorHook = std::function<Tensor(const Tensor&)>;  // returns a replacement grad, or undefined
using PostAccumulateHook = std::function<void(const Tensor&)>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const { return impl().sizes; }
  const Shape& shape() const { return impl().sizes; }
  int64_t size(int64_t dim) const;
  const Shape& strides() const { return impl().strides; }
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  int64_t numel() const { return impl().numel; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  int64_t storage_offset() const { return impl().offset; }
  bool is_contiguous() const { return impl().contiguous; }
  size_t element_size() const { return ember::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  const Storage& storage() const { return impl().storage; }
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  TensorImpl* unsafe_impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // ---- data access (CPU tensors) ----
  void* data_ptr() const;
  template <typename T>
  T* data_ptr() const {
    EMBER_CHECK(dtype_of<T>() == dtype(), "data_ptr: expected dtype ", dtype_name(dtype_of<T>()), ", got ",
                dtype_name(dtype()));
    return static_cast<T*>(data_ptr());
  }
  template <typename T>
  T item() const;
  double item() const { return item<double>(); }
  template <typename T>
  std::vector<T> to_vector() const;
  std::string str() const;

  // ---- views (share storage) ----
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;  // a view when strides allow, else a copy
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor contiguous() const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split_with_sizes(const std::vector<int64_t>& sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;

  // ---- copies and conversion ----
  Tensor clone() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  // With non_blocking, a copy between pinned host memory and a GPU is only queued on the GPU's
  // current stream (synchronize before reading the result on the host); otherwise as to(device).
  Tensor to(Device device, bool non_blocking) const;
  Tensor cpu() const { return to(Device(kCPU)); }
  // A copy in page-locked host memory, which GPU copies read and write asynchronously (needs
  // the CUDA backend); this tensor when it already is.
  Tensor pin_memory() const;
  bool is_pinned() const;
  // Moves this tensor's storage to shared memory (core/shared_memory.h) in place, so that processes
  // given it (multiprocessing::spawn, Queue) see one copy: every view on the storage moves too.
  // A no-op when it already is shared; CUDA tensors raise. Returns this tensor.
  const Tensor& share_memory_() const;
  bool is_shared() const;
  Tensor detach() const;  // same storage, no autograd history
  // Points this tensor (and every handle sharing its impl) at `data`'s storage, shape and dtype,
  // keeping its autograd identity: how Module::to(device) moves a parameter in place.
  void set_data(const Tensor& data) const;
  // Points this tensor (and every handle sharing its impl) at `source`'s data and autograd
  // history (grad_fn, output_nr, requires_grad): it stands for `source` in every op after. How
  // DataParallel's replica layers, which hold their parameter handles, see each forward's
  // differentiable copy of the master parameters. Hooks and .grad are dropped.
  void rebind_with_history(const Tensor& source) const;

  // ---- math (all broadcast, all accept any strides) ----
  Tensor add(const Tensor& other, Scalar alpha = 1) const;
  Tensor sub(const Tensor& other, Scalar alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(Scalar exponent) const;
  Tensor neg() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor reciprocal() const;
  Tensor square() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor erf() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor relu() const;
  Tensor gelu(bool tanh_approximation = false) const;
  Tensor silu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor leaky_relu(double negative_slope = 0.01) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  Tensor clamp_min(Scalar min) const { return clamp(min, std::nullopt); }
  Tensor clamp_max(Scalar max) const { return clamp(std::nullopt, max); }
  Tensor minimum(const Tensor& other) const;
  Tensor maximum(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor logical_not() const;  // bool result: true where the element is zero / false
  Tensor matmul(const Tensor& other) const;

  // ---- reductions (dims empty = all dims) ----
  Tensor sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor prod(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor var(const std::vector<int64_t>& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor std(const std::vector<int64_t>& dims = {}, bool unbiased = true, bool keepdim = false) const;
  Tensor norm(double p = 2.0, const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor logsumexp(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor amax(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor amin(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor max() const;  // over all elements
  Tensor min() const;
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;  // (values, indices)
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;

  // ---- in place (bump the version counter) ----
  Tensor& add_(const Tensor& other, Scalar alpha = 1);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& div_(const Tensor& other);
  Tensor& add_(Scalar other);
  Tensor& mul_(Scalar other);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);
  Tensor& relu_();
  Tensor& fill_(Scalar value);
  Tensor& zero_();
  Tensor& copy_(const Tensor& src, bool non_blocking = false);  // broadcasts src and casts its dtype
  Tensor& uniform_(double low = 0.0, double high = 1.0);
  Tensor& normal_(double mean = 0.0, double std = 1.0);
  Tensor& bernoulli_(double p);
  uint32_t version() const { return impl().storage->version(); }
  void bump_version() const { impl().storage->bump_version(); }

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);
  bool is_leaf() const;
  const Tensor& grad() const;  // undefined until a backward reaches this leaf
  Tensor& mutable_grad() const;
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // Runs on the gradient flowing into this tensor; may return a replacement. Returns a handle id.
  size_t register_hook(TensorHook hook) const;
  void remove_hook(size_t handle) const;
  // Leaves only: runs once this leaf's .grad is final for the current backward pass.
  size_t register_post_accumulate_grad_hook(PostAccumulateHook hook) const;
  void retain_grad() const;
  bool retains_grad() const;
  AutogradMeta& autograd_meta() const;  // created on first use
  AutogradMeta* autograd_meta_or_null() const { return impl().autograd.get(); }

 private:
  TensorImpl& impl() const {
    EMBER_CHECK(impl_ != nullptr, "Tensor: the tensor is undefined (default-constructed)");
    return *impl_;
  }
  std::shared_ptr<TensorImpl> impl_;
};

// Autograd state of one tensor. Only data lives here; the autograd library gives it meaning.
struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;         // null for leaves
  uint32_t output_nr = 0;                          // which output of grad_fn this tensor is
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves: the node that accumulates into .grad
  std::vector<std::pair<size_t, TensorHook>> hooks;
  std::vector<std::pair<size_t, PostAccumulateHook>> post_accumulate_hooks;
  size_t next_hook_id = 1;
};

std::ostream& operator<<(std::ostream& out, const Tensor& tensor);

// Arithmetic operators, broadcasting like PyTorch; Scalar operands take the tensor's dtype
// unless they are of a higher category (a float scalar with an int tensor gives float32).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);  // logical_not, for bool masks

}  // namespace ember
