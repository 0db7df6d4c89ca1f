// Containers: Sequential (chains single-tensor forwards), ModuleList and ModuleDict. Children
// are named "0", "1", ... (or by key), so parameter names read "layer1.0.conv1.weight".
#pragma once

#include <map>

#include "nn/module.h"

namespace ember::nn {

class SequentialImpl : public Cloneable<SequentialImpl> {
 public:
  SequentialImpl() : Cloneable("Sequential") {}
  template <typename... Modules>
  explicit SequentialImpl(Modules&&... modules) : Cloneable("Sequential") {
    (push_back(std::forward<Modules>(modules)), ...);
  }
  template <typename M>
  void push_back(const ModuleHolder<M>& holder) {
    push_back(std::static_pointer_cast<Module>(holder.ptr()));
  }
  void push_back(std::shared_ptr<Module> module);
  void reset() override;  // clones re-register the same module types, then receive values
  Tensor forward(const Tensor& input) override;
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t index) const;

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
EMBER_MODULE(Sequential);

class ModuleListImpl : public Cloneable<ModuleListImpl> {
 public:
  ModuleListImpl() : Cloneable("ModuleList") {}
  template <typename M>
  void push_back(const ModuleHolder<M>& holder) {
    push_back(std::static_pointer_cast<Module>(holder.ptr()));
  }
  void push_back(std::shared_ptr<Module> module);
  void reset() override;
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t index) const;
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return modules_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
EMBER_MODULE(ModuleList);

class ModuleDictImpl : public Cloneable<ModuleDictImpl> {
 public:
  ModuleDictImpl() : Cloneable("ModuleDict") {}
  template <typename M>
  void insert(const std::string& key, const ModuleHolder<M>& holder) {
    insert(key, std::static_pointer_cast<Module>(holder.ptr()));
  }
  void insert(const std::string& key, std::shared_ptr<Module> module);
  void reset() override;
  size_t size() const { return keys_.size(); }
  bool contains(const std::string& key) const;
  std::shared_ptr<Module> at(const std::string& key) const;
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  std::vector<std::string> keys_;
  std::vector<std::shared_ptr<Module>> modules_;
};
EMBER_MODULE(ModuleDict);

}  // namespace ember::nn
