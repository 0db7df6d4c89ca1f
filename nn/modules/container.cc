// Container bookkeeping. A container's clone re-registers clones of its elements: its reset()
// rebuilds from the (shallow-copied) element list by cloning each element, under the same names.
#include "nn/modules/container.h"

#include <algorithm>

#include "nn/modules/activation.h"
#include "nn/modules/batchnorm.h"

namespace ember::nn {

namespace {

// Calls fn with the module as a BatchNorm (either rank), whose forward_relu can take the ReLU after
// it; false when the module is no BatchNorm.
template <typename Fn>
bool with_batch_norm(Module* module, Fn&& fn) {
  if (auto* bn = dynamic_cast<BatchNorm2dImpl*>(module)) return fn(*bn), true;
  if (auto* bn = dynamic_cast<BatchNorm1dImpl*>(module)) return fn(*bn), true;
  return false;
}

}  // namespace

void SequentialImpl::push_back(std::shared_ptr<Module> module) {
  push_back(std::to_string(modules_.size()), std::move(module));
}

void SequentialImpl::push_back(std::string name, std::shared_ptr<Module> module) {
  const size_t index = modules_.size();
  EMBER_CHECK(module != nullptr, "Sequential: entry ", index, " ('", name, "') is null");
  for (size_t i = 0; i < names_.size(); ++i)
    EMBER_CHECK(names_[i] != name, "Sequential: entry ", index, " is named '", name, "', as entry ", i, " already is");
  // Checked before any group is made, so that a refused name leaves nothing behind.
  EMBER_CHECK(!name.empty() && name.front() != '.' && name.back() != '.' && name.find("..") == std::string::npos,
              "Sequential: entry ", index, "'s name '", name, "' has an empty part");
  const size_t dot = name.rfind('.');
  Module& parent = dot == std::string::npos ? *this : group_for(name.substr(0, dot), name);
  const std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
  EMBER_CHECK(parent.find_child(last) == nullptr, "Sequential: entry ", index, " is named '", name,
              "', but entries named '", name, ".*' exist already; a name cannot be both an entry and a prefix");
  if (&parent == this)
    register_module(last, module);
  else
    static_cast<ModuleDictImpl&>(parent).insert(last, module);
  names_.push_back(std::move(name));
  modules_.push_back(std::move(module));
}

Module& SequentialImpl::group_for(const std::string& prefix, const std::string& entry) {
  Module* parent = this;
  for (size_t start = 0;;) {
    const size_t dot = prefix.find('.', start);
    const std::string part = prefix.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    std::shared_ptr<Module> child = parent->find_child(part);
    if (child == nullptr) {
      auto group = std::make_shared<ModuleDictImpl>();
      if (parent == this)
        register_module(part, group);
      else
        static_cast<ModuleDictImpl*>(parent)->insert(part, group);
      groups_.push_back(group.get());
      child = group;
    } else {
      EMBER_CHECK(std::find(groups_.begin(), groups_.end(), child.get()) != groups_.end(), "Sequential: entry ",
                  modules_.size(), " is named '", entry, "', but '", prefix.substr(0, dot),
                  "' is an entry; a name cannot be both an entry and a prefix");
    }
    parent = child.get();
    if (dot == std::string::npos) return *parent;
    start = dot + 1;
  }
}

void SequentialImpl::reset() {
  std::vector<std::string> names = std::move(names_);
  std::vector<std::shared_ptr<Module>> originals = std::move(modules_);
  names_.clear();
  modules_.clear();
  groups_.clear();
  for (size_t i = 0; i < originals.size(); ++i) push_back(names[i], originals[i]->clone());
}

Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  for (size_t i = 0; i < modules_.size(); ++i) {
    // Fused only when no hook expects to see the two calls.
    const bool relu_next = i + 1 < modules_.size() && dynamic_cast<const ReLUImpl*>(modules_[i + 1].get()) != nullptr &&
                           !modules_[i]->has_forward_hooks() && !modules_[i + 1]->has_forward_hooks();
    if (relu_next && with_batch_norm(modules_[i].get(), [&](auto& bn) { x = bn.forward_relu(x); })) {
      ++i;
      continue;
    }
    x = modules_[i]->call(x);
  }
  return x;
}

const std::shared_ptr<Module>& SequentialImpl::operator[](size_t index) const {
  EMBER_CHECK(index < modules_.size(), "Sequential: index ", index, " is out of range for ", modules_.size(),
              " modules");
  return modules_[index];
}

const std::string& SequentialImpl::name(size_t index) const {
  EMBER_CHECK(index < names_.size(), "Sequential: index ", index, " is out of range for ", names_.size(), " modules");
  return names_[index];
}

void ModuleListImpl::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

void ModuleListImpl::reset() {
  std::vector<std::shared_ptr<Module>> originals = std::move(modules_);
  modules_.clear();
  for (const auto& m : originals) push_back(m->clone());
}

const std::shared_ptr<Module>& ModuleListImpl::operator[](size_t index) const {
  EMBER_CHECK(index < modules_.size(), "ModuleList: index ", index, " is out of range for ", modules_.size(),
              " modules");
  return modules_[index];
}

void ModuleDictImpl::insert(const std::string& key, std::shared_ptr<Module> module) {
  EMBER_CHECK(!contains(key), "ModuleDict: key '", key, "' already present");
  register_module(key, module);
  keys_.push_back(key);
  modules_.push_back(std::move(module));
}

void ModuleDictImpl::reset() {
  std::vector<std::string> keys = std::move(keys_);
  std::vector<std::shared_ptr<Module>> originals = std::move(modules_);
  keys_.clear();
  modules_.clear();
  for (size_t i = 0; i < keys.size(); ++i) insert(keys[i], originals[i]->clone());
}

bool ModuleDictImpl::contains(const std::string& key) const {
  for (const auto& k : keys_)
    if (k == key) return true;
  return false;
}

std::shared_ptr<Module> ModuleDictImpl::at(const std::string& key) const {
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) return modules_[i];
  EMBER_FAIL("ModuleDict: no module with key '", key, "'");
}

}  // namespace ember::nn
