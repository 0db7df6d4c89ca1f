// Module registration, traversal, mode and device changes, state_dict loading and printing.
#include "nn/module.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/shared_memory.h"

namespace ember::nn {

namespace {

void check_name(const std::string& name, const char* op) {
  EMBER_CHECK(!name.empty() && name.find('.') == std::string::npos, op,
              ": name must be non-empty and contain no '.', got '", name, "'");
}

std::string describe(const Tensor& t) { return shape_str(t.sizes()) + " " + dtype_name(t.dtype()); }

}  // namespace

Tensor Module::forward(const Tensor&) {
  EMBER_FAIL(type_name_, ": this module has no single-tensor forward(Tensor); call its own forward overload");
}

size_t Module::register_forward_pre_hook(ForwardPreHook hook) {
  size_t id = hooks_.next_id++;
  hooks_.pre.emplace_back(id, std::move(hook));
  return id;
}

size_t Module::register_forward_hook(ForwardHook hook) {
  size_t id = hooks_.next_id++;
  hooks_.post.emplace_back(id, std::move(hook));
  return id;
}

void Module::remove_forward_hook(size_t handle) {
  std::erase_if(hooks_.pre, [&](const auto& h) { return h.first == handle; });
  std::erase_if(hooks_.post, [&](const auto& h) { return h.first == handle; });
}

void Module::run_forward_pre_hooks() {
  for (auto& [id, hook] : hooks_.pre) hook(*this);
}

void Module::run_forward_hooks(const std::vector<Tensor>& outputs) {
  for (auto& [id, hook] : hooks_.post) hook(*this, outputs);
}

Tensor Module::call(const Tensor& input) {
  if (!has_forward_hooks()) return forward(input);
  run_forward_pre_hooks();
  Tensor out = forward(input);
  run_forward_hooks({out});
  return out;
}

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_name(name, "register_parameter");
  for (const Entry& e : parameters_)
    EMBER_CHECK(e.name != name, "register_parameter: parameter '", name, "' already exists in ", type_name_);
  for (const Entry& e : buffers_)
    EMBER_CHECK(e.name != name, "register_parameter: '", name, "' is already a buffer of ", type_name_);
  if (tensor.defined()) {
    // A parameter is a leaf of its own, whatever produced its initial value.
    tensor = tensor.detach();
    if (requires_grad) tensor.requires_grad_(true);
  }
  parameters_.push_back({name, tensor, true});
  return parameters_.back().tensor;
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_name(name, "register_buffer");
  for (const Entry& e : buffers_)
    EMBER_CHECK(e.name != name, "register_buffer: buffer '", name, "' already exists in ", type_name_);
  for (const Entry& e : parameters_)
    EMBER_CHECK(e.name != name, "register_buffer: '", name, "' is already a parameter of ", type_name_);
  buffers_.push_back({name, tensor.defined() ? tensor.detach() : tensor, persistent});
  return buffers_.back().tensor;
}

std::shared_ptr<Module> Module::register_module(const std::string& name, std::shared_ptr<Module> module) {
  check_name(name, "register_module");
  EMBER_CHECK(module != nullptr, "register_module: submodule '", name, "' is null");
  for (const auto& [existing, m] : children_)
    EMBER_CHECK(existing != name, "register_module: submodule '", name, "' already exists in ", type_name_);
  children_.emplace_back(name, module);
  return module;
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  for (auto& [existing, m] : children_) {
    if (existing == name) {
      m = std::move(module);
      return;
    }
  }
  EMBER_FAIL("replace_module: ", type_name_, " has no submodule '", name, "'");
}

// A tensor reached twice (a module shared by two parents) is listed once, under its first name,
// as PyTorch's named_parameters/named_buffers do; state_dict() keeps every path.
void Module::collect(const std::string& prefix, bool params, bool recurse, std::unordered_set<const TensorImpl*>& seen,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const Entry& e : params ? parameters_ : buffers_) {
    if (!e.tensor.defined() || !seen.insert(e.tensor.unsafe_impl()).second) continue;
    out.emplace_back(prefix + e.name, e.tensor);
  }
  if (!recurse) return;
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", params, true, seen, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  collect("", true, recurse, seen, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  collect("", false, recurse, seen, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, child] : children_) out.push_back(child);
  return out;
}

void Module::collect_modules(const std::string& prefix, std::unordered_set<const Module*>& seen,
                             std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out) {
  if (!seen.insert(this).second) return;  // a shared module is listed once, as in PyTorch
  out.emplace_back(prefix, shared_from_this());
  for (const auto& [name, child] : children_)
    child->collect_modules(prefix.empty() ? name : prefix + "." + name, seen, out);
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules(const std::string& prefix) {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::unordered_set<const Module*> seen;
  collect_modules(prefix, seen, out);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules() {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [name, m] : named_modules()) out.push_back(m);
  return out;
}

void Module::apply(const std::function<void(Module&)>& fn) {
  fn(*this);
  for (const auto& [name, child] : children_) child->apply(fn);
}

Tensor* Module::find_parameter(const std::string& name) {
  for (Entry& e : parameters_)
    if (e.name == name) return &e.tensor;
  return nullptr;
}

Tensor* Module::find_buffer(const std::string& name) {
  for (Entry& e : buffers_)
    if (e.name == name) return &e.tensor;
  return nullptr;
}

std::shared_ptr<Module> Module::find_child(const std::string& name) const {
  for (const auto& [existing, child] : children_)
    if (existing == name) return child;
  return nullptr;
}

void Module::train(bool on) {
  training_ = on;
  for (const auto& [name, child] : children_) child->train(on);
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (Entry* e : [&] {
         std::vector<Entry*> all;
         for (Entry& p : parameters_) all.push_back(&p);
         for (Entry& b : buffers_) all.push_back(&b);
         return all;
       }()) {
    if (!e->tensor.defined() || e->tensor.device() == device) continue;
    Tensor grad = e->tensor.grad();
    e->tensor.set_data(e->tensor.detach().to(device));
    if (grad.defined()) e->tensor.mutable_grad() = grad.to(device);
  }
  for (const auto& [name, child] : children_) child->to(device);
}

void Module::to(DType dtype) {
  EMBER_CHECK(is_floating(dtype), "Module::to: expected a floating dtype, got ", dtype_name(dtype));
  NoGradGuard no_grad;
  for (auto* list : {&parameters_, &buffers_}) {
    for (Entry& e : *list) {
      if (!e.tensor.defined() || !is_floating(e.tensor.dtype()) || e.tensor.dtype() == dtype) continue;
      Tensor grad = e.tensor.grad();  // set_data drops a gradient of the old dtype; convert it, as PyTorch does
      e.tensor.set_data(e.tensor.detach().to(dtype));
      if (grad.defined()) e.tensor.mutable_grad() = grad.to(dtype);
    }
  }
  for (const auto& [name, child] : children_) child->to(dtype);
}

void Module::share_memory() {
  std::vector<StorageImpl*> storages;
  for (const auto& [name, t] : named_parameters()) {
    EMBER_CHECK(t.device().type == kCPU, "Module::share_memory: parameter '", name, "' is on ", t.device(),
                "; only CPU modules can be shared between processes (CUDA memory is not)");
    storages.push_back(t.storage().get());
  }
  for (const auto& [name, t] : named_buffers()) {
    if (!t.defined()) continue;
    EMBER_CHECK(t.device().type == kCPU, "Module::share_memory: buffer '", name, "' is on ", t.device(),
                "; only CPU modules can be shared between processes (CUDA memory is not)");
    storages.push_back(t.storage().get());
  }
  shm::move_to_shared(storages, "Module::share_memory");
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (Tensor& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none)
      p.mutable_grad() = Tensor();
    else
      p.mutable_grad().zero_();
  }
}

std::shared_ptr<Module> Module::clone(std::optional<Device>) const {
  EMBER_FAIL(type_name_, ": clone() needs the module to derive from nn::Cloneable<", type_name_,
             "> and implement reset(), which (re)creates its parameters and submodules");
}

void Module::copy_state_into(Module& copy, std::optional<Device> device) const {
  NoGradGuard no_grad;
  auto copy_entries = [&](const std::vector<Entry>& from, std::vector<Entry>& to, const char* kind) {
    EMBER_CHECK(from.size() == to.size(), "clone: ", type_name_, "::reset() registered ", to.size(), " ", kind,
                "s but the original has ", from.size());
    for (size_t i = 0; i < from.size(); ++i) {
      EMBER_CHECK(from[i].name == to[i].name, "clone: ", type_name_, "::reset() registered ", kind, " '", to[i].name,
                  "' where the original has '", from[i].name, "'");
      to[i].persistent = from[i].persistent;
      if (!from[i].tensor.defined()) {
        to[i].tensor = Tensor();
        continue;
      }
      Tensor value = from[i].tensor.detach().to(device.value_or(from[i].tensor.device())).clone();
      if (to[i].tensor.defined())
        to[i].tensor.set_data(value);
      else
        to[i].tensor = value;
    }
  };
  copy_entries(parameters_, copy.parameters_, "parameter");
  copy_entries(buffers_, copy.buffers_, "buffer");
  copy.training_ = training_;
  copy.type_name_ = type_name_;
  copy_settings_into(copy);
  EMBER_CHECK(children_.size() == copy.children_.size(), "clone: ", type_name_, "::reset() registered ",
              copy.children_.size(), " submodules but the original has ", children_.size());
  for (size_t i = 0; i < children_.size(); ++i) {
    EMBER_CHECK(children_[i].first == copy.children_[i].first, "clone: ", type_name_,
                "::reset() registered submodule '", copy.children_[i].first, "' where the original has '",
                children_[i].first, "'");
    children_[i].second->copy_state_into(*copy.children_[i].second, device);
  }
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  // PyTorch's order: a module's parameters, then its persistent buffers, then each child.
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m, const std::string& prefix) {
    for (const Entry& e : m.parameters_)
      if (e.tensor.defined()) out.emplace_back(prefix + e.name, e.tensor.detach());
    for (const Entry& e : m.buffers_)
      if (e.tensor.defined() && e.persistent) out.emplace_back(prefix + e.name, e.tensor.detach());
    for (const auto& [name, child] : m.children_) walk(*child, prefix + name + ".");
  };
  walk(*this, "");
  return out;
}

LoadResult Module::load_state_dict(const NamedTensors& state, bool strict) {
  NamedTensors own = state_dict();
  LoadResult result;
  std::vector<std::pair<Tensor, const Tensor*>> assignments;
  for (const auto& [name, target] : own) {
    auto it = std::find_if(state.begin(), state.end(), [&](const auto& entry) { return entry.first == name; });
    if (it == state.end()) {
      result.missing_keys.push_back(name);
      continue;
    }
    const Tensor& source = it->second;
    if (source.sizes() != target.sizes() || source.dtype() != target.dtype()) {
      result.mismatched_keys.push_back(name + ": expected " + describe(target) + ", got " + describe(source));
      continue;
    }
    assignments.emplace_back(target, &source);
  }
  for (const auto& [name, source] : state) {
    bool known = std::any_of(own.begin(), own.end(), [&](const auto& entry) { return entry.first == name; });
    if (!known) result.unexpected_keys.push_back(name);
  }
  bool clean = result.missing_keys.empty() && result.unexpected_keys.empty() && result.mismatched_keys.empty();
  if (strict && !clean) {
    std::ostringstream message;
    message << "load_state_dict: error(s) in loading state_dict for " << type_name_ << ":";
    auto list = [&](const char* title, const std::vector<std::string>& keys) {
      if (keys.empty()) return;
      message << "\n  " << title << ":";
      for (const std::string& k : keys) message << "\n    " << k;
    };
    list("missing keys", result.missing_keys);
    list("unexpected keys", result.unexpected_keys);
    list("shape/dtype mismatches", result.mismatched_keys);
    bool prefixed =
        !result.unexpected_keys.empty() && std::all_of(result.unexpected_keys.begin(), result.unexpected_keys.end(),
                                                       [](const std::string& k) { return k.rfind("module.", 0) == 0; });
    if (prefixed)
      message << "\n  (every unexpected key starts with 'module.': the file was saved from a wrapper; "
                 "nn::strip_prefix(state, \"module.\") removes it)";
    EMBER_FAIL(message.str());
  }
  NoGradGuard no_grad;
  for (auto& [target, source] : assignments) {
    Tensor t = target;
    copy_into(t, *source);  // straight into the parameter's device; no version bump for loads
    t.bump_version();
  }
  return result;
}

void Module::repr_into(std::ostream& out, int indent) const {
  out << type_name_ << "(";
  std::string extra = extra_repr();
  if (children_.empty()) {
    out << extra << ")";
    return;
  }
  out << "\n";
  std::string pad(indent + 2, ' ');
  if (!extra.empty()) out << pad << extra << "\n";
  for (const auto& [name, child] : children_) {
    out << pad << "(" << name << "): ";
    child->repr_into(out, indent + 2);
    out << "\n";
  }
  out << std::string(indent, ' ') << ")";
}

std::string Module::repr() const {
  std::ostringstream out;
  repr_into(out, 0);
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Module& module) { return out << module.repr(); }

void check_input_device(const std::string& module, const Tensor& input, const Tensor& parameter) {
  if (!input.defined() || !parameter.defined() || input.device() == parameter.device()) return;
  const std::string where = parameter.device().str();
  EMBER_FAIL(module, ": expected input on ", where, " (where the module's parameters are), got ", input.device().str(),
             "; move it there with .to(", where, ")");
}

NamedTensors strip_prefix(const NamedTensors& state, const std::string& prefix) {
  NamedTensors out;
  for (const auto& [name, t] : state)
    out.emplace_back(name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name, t);
  return out;
}

}  // namespace ember::nn
