// Container bookkeeping. A container's clone re-registers clones of its elements: its reset()
// rebuilds from the (shallow-copied) element list by cloning each element.
#include "nn/modules/container.h"

namespace ember::nn {

void SequentialImpl::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

void SequentialImpl::reset() {
  std::vector<std::shared_ptr<Module>> originals = std::move(modules_);
  modules_.clear();
  for (const auto& m : originals) push_back(m->clone());
}

Tensor SequentialImpl::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& m : modules_) x = m->forward(x);
  return x;
}

const std::shared_ptr<Module>& SequentialImpl::operator[](size_t index) const {
  EMBER_CHECK(index < modules_.size(), "Sequential: index ", index, " is out of range for ", modules_.size(),
              " modules");
  return modules_[index];
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
