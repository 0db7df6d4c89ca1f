// Module: the base of every layer and model, in the PyTorch C++ frontend's shape. A module
// registers parameters, buffers and child modules by name; names compose hierarchically
// ("layer1.0.conv1.weight") in named_parameters() and state_dict().
//
//   struct Net : ember::nn::Cloneable<Net> {
//     Net() { reset(); }
//     void reset() override {
//       fc1 = register_module("fc1", ember::nn::Linear(784, 128));
//       fc2 = register_module("fc2", ember::nn::Linear(128, 10));
//     }
//     ember::Tensor forward(const ember::Tensor& x) override { return fc2(ember::relu(fc1(x))); }
//     ember::nn::Linear fc1{nullptr}, fc2{nullptr};
//   };
#pragma once

#include <functional>
#include <optional>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/io/safetensors.h"
#include "core/tensor.h"

namespace ember::nn {

template <typename Contained>
class ModuleHolder;

// What a non-strict load_state_dict found; a strict load raises listing all of it.
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
  std::vector<std::string> mismatched_keys;  // "name: expected [shape] float32, got [shape] float64"
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = default;
  Module& operator=(const Module&) = default;

  // The single-input forward that Sequential chains; modules with other signatures define
  // their own forward and leave this one raising.
  virtual Tensor forward(const Tensor& input);

  // ---- registration ----
  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // Non-persistent buffers are not part of state_dict (e.g. cached masks).
  Tensor& register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
  std::shared_ptr<Module> register_module(const std::string& name, std::shared_ptr<Module> module);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    register_module(name, std::static_pointer_cast<Module>(module));
    return module;
  }
  // A holder (nn::Linear, ...) comes back as the same holder type.
  template <typename Holder, typename = typename Holder::ContainedType>
  Holder register_module(const std::string& name, Holder holder) {
    register_module(name, std::static_pointer_cast<Module>(holder.ptr()));
    return holder;
  }
  // Replaces a registered child (e.g. convert_sync_batchnorm swapping BatchNorm2d).
  void replace_module(const std::string& name, std::shared_ptr<Module> module);

  // ---- traversal (registration order; this module's own entries first; a module or tensor
  // reached twice through a shared submodule is listed once, under its first name) ----
  std::vector<Tensor> parameters(bool recurse = true) const;
  // Virtual so wrappers (DistributedDataParallel) can present the wrapped module's names.
  virtual std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  virtual std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  // This module and all descendants, depth first (prefix "" for this one).
  std::vector<std::shared_ptr<Module>> modules();
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules(const std::string& prefix = "");
  void apply(const std::function<void(Module&)>& fn);
  Tensor* find_parameter(const std::string& name);  // this module only
  Tensor* find_buffer(const std::string& name);
  std::shared_ptr<Module> find_child(const std::string& name) const;

  // ---- mode, placement, gradients ----
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves (copies) parameters and buffers in place of the old ones; parameters stay leaves.
  virtual void to(Device device);
  virtual void to(DType dtype);  // floating parameters (and their gradients) and buffers only
  void zero_grad(bool set_to_none = true);
  // Moves every parameter and buffer to shared memory, packed into one segment, for processes
  // that train one model together (multiprocessing::spawn, Hogwild!). Gradients stay private to
  // each process. CPU modules only.
  void share_memory();

  // A deep copy: parameters and buffers are copied, children cloned (DataParallel replicates
  // with it). Implemented by Cloneable<Derived>.
  virtual std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const;

  // ---- forward hooks ----
  // As PyTorch's register_forward_pre_hook / register_forward_hook: they run when the module is
  // called through its holder (`fc(x)`), through call(), or by a container (Sequential), not from
  // a direct forward() call. The post hook sees the outputs that are tensors. A clone does not
  // inherit them. Fully sharded data parallelism gathers and frees a unit's parameters in them.
  using ForwardPreHook = std::function<void(Module&)>;
  using ForwardHook = std::function<void(Module&, const std::vector<Tensor>& outputs)>;
  size_t register_forward_pre_hook(ForwardPreHook hook);
  size_t register_forward_hook(ForwardHook hook);
  void remove_forward_hook(size_t handle);
  bool has_forward_hooks() const { return !hooks_.pre.empty() || !hooks_.post.empty(); }
  void run_forward_pre_hooks();
  void run_forward_hooks(const std::vector<Tensor>& outputs);
  // forward(input) between the hooks.
  Tensor call(const Tensor& input);

  // ---- state ----
  virtual NamedTensors state_dict() const;
  // Copies values into the existing parameters and buffers (on their current device).
  virtual LoadResult load_state_dict(const NamedTensors& state, bool strict = true);

  // ---- printing ----
  const std::string& type_name() const { return type_name_; }
  void set_type_name(std::string name) { type_name_ = std::move(name); }
  // One-line description of this module's configuration, e.g. "3, 16, kernel_size=(3, 3)".
  virtual std::string extra_repr() const { return ""; }
  std::string repr() const;  // the whole tree, like PyTorch's print(module)

 protected:
  // Copies this module's own parameters/buffers into `copy` (same structure) and clones its
  // children onto `device`; used by Cloneable after it re-ran reset() on the copy.
  void copy_state_into(Module& copy, std::optional<Device> device) const;
  // Settings a module gained after construction and reset() does not recreate (a BatchNorm's
  // SyncBatchNorm reducer): a clone (a DataParallel replica) must behave as the original.
  virtual void copy_settings_into(Module& copy) const { (void)copy; }

 private:
  struct Entry {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  void collect(const std::string& prefix, bool params, bool recurse, std::unordered_set<const TensorImpl*>& seen,
               std::vector<std::pair<std::string, Tensor>>& out) const;
  void collect_modules(const std::string& prefix, std::unordered_set<const Module*>& seen,
                       std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out);
  void repr_into(std::ostream& out, int indent) const;

  // Copies (clones, DataParallel's replicas) start without hooks: they belong to one instance.
  struct Hooks {
    Hooks() = default;
    Hooks(const Hooks&) {}
    Hooks& operator=(const Hooks&) { return *this; }
    std::vector<std::pair<size_t, ForwardPreHook>> pre;
    std::vector<std::pair<size_t, ForwardHook>> post;
    size_t next_id = 1;
  };

  std::string type_name_;
  Hooks hooks_;
  bool training_ = true;
  std::vector<Entry> parameters_;
  std::vector<Entry> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;

  template <typename Derived>
  friend class Cloneable;
};

std::ostream& operator<<(std::ostream& out, const Module& module);

// Raises unless `input` is on the device of `parameter` (skipped when it is undefined), naming the
// module and both devices: a placed model's forward that forgot to move an activation to the next
// layer's device (`x.to(device)`) is told so before any kernel reads another device's memory.
void check_input_device(const std::string& module, const Tensor& input, const Tensor& parameter);

// The state with `prefix` removed from every key that has it (e.g. "module." from a file saved
// through a wrapper that did not strip it).
NamedTensors strip_prefix(const NamedTensors& state, const std::string& prefix);

// CRTP base that gives a module its deep clone(): the copy re-runs reset() (which must
// (re)create every parameter, buffer and child with register_*) and then receives this
// module's values. Ember's layers all derive from it; user models do too, PyTorch-style.
template <typename Derived>
class Cloneable : public Module {
 public:
  using Module::Module;
  virtual void reset() = 0;

  std::shared_ptr<Module> clone(std::optional<Device> device = std::nullopt) const override {
    auto copy = std::make_shared<Derived>(static_cast<const Derived&>(*this));
    copy->parameters_.clear();
    copy->buffers_.clear();
    copy->children_.clear();
    copy->reset();
    copy_state_into(*copy, device);
    return copy;
  }
};

// The tensors among a forward's outputs, for the forward hooks.
inline void append_tensor(std::vector<Tensor>& out, const Tensor& t) { out.push_back(t); }
template <typename T>
void append_tensor(std::vector<Tensor>&, const T&) {}
inline std::vector<Tensor> tensors_of(const Tensor& out) { return {out}; }
inline std::vector<Tensor> tensors_of(const std::vector<Tensor>& out) { return out; }
template <typename... T>
std::vector<Tensor> tensors_of(const std::tuple<T...>& out) {
  std::vector<Tensor> tensors;
  std::apply([&](const auto&... part) { (append_tensor(tensors, part), ...); }, out);
  return tensors;
}
template <typename T>
std::vector<Tensor> tensors_of(const T&) {
  return {};
}

// A handle to a module, like torch::nn::Linear wrapping LinearImpl: `Linear fc(10, 5); fc(x)`.
template <typename Contained>
class ModuleHolder {
 public:
  using ContainedType = Contained;
  // Default-constructs the module when it has a default constructor: nn::ReLU().
  template <typename C = Contained, typename = std::enable_if_t<std::is_default_constructible_v<C>>>
  ModuleHolder() : impl_(std::make_shared<C>()) {}
  ModuleHolder(std::nullptr_t) {}  // NOLINT: an empty holder, filled later
  ModuleHolder(std::shared_ptr<Contained> module) : impl_(std::move(module)) {}  // NOLINT
  template <typename First, typename... Rest,
            typename = std::enable_if_t<!std::is_same_v<std::decay_t<First>, std::nullptr_t> &&
                                        !std::is_same_v<std::decay_t<First>, std::shared_ptr<Contained>>>>
  explicit ModuleHolder(First&& first, Rest&&... rest)
      : impl_(std::make_shared<Contained>(std::forward<First>(first), std::forward<Rest>(rest)...)) {}

  Contained* operator->() const { return checked(); }
  Contained& operator*() const { return *checked(); }
  const std::shared_ptr<Contained>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }
  template <typename... Args>
  auto operator()(Args&&... args) const {
    Contained* module = checked();
    if (!module->has_forward_hooks()) return module->forward(std::forward<Args>(args)...);
    module->run_forward_pre_hooks();
    auto out = module->forward(std::forward<Args>(args)...);
    module->run_forward_hooks(tensors_of(out));
    return out;
  }

 private:
  Contained* checked() const {
    EMBER_CHECK(impl_ != nullptr, "ModuleHolder: accessing an empty module holder (constructed with nullptr)");
    return impl_.get();
  }
  std::shared_ptr<Contained> impl_;
};

}  // namespace ember::nn

// Declares `Name` as the holder of `NameImpl`, as TORCH_MODULE does.
#define EMBER_MODULE(Name)                                     \
  class Name : public ::ember::nn::ModuleHolder<Name##Impl> {  \
   public:                                                     \
    using ::ember::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
  }
