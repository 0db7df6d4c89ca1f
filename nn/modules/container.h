// Containers: Sequential (chains single-tensor forwards), ModuleList and ModuleDict. Children
// are named "0", "1", ... (or by key), so parameter names read "layer1.0.conv1.weight".
//
//   nn::Sequential seq;
//   seq->push_back("conv1", nn::Conv2d(3, 8, 3));  // state_dict keys "conv1.weight", "conv1.bias"
//   seq->push_back(nn::ReLU());                     // unnamed: named by its index, "1"
//   seq->push_back("layer1.0", block);              // keys "layer1.0.conv1.weight", ...
#pragma once

#include <map>

#include "nn/module.h"

namespace ember::nn {

// Entries run in order. An entry may carry a name (its state_dict keys then read "conv1.weight"
// instead of "0.weight"); a dotted name ("layer1.0") files the entry under a plain ModuleDict per
// prefix, so a model's layers flattened into one Sequential keep the model's keys exactly.
// A BatchNorm entry directly followed by a ReLU entry runs as one fused batch_norm_relu (the
// same results as the two in turn, as BatchNorm's forward_relu), so a network written as
// BN, ReLU entries runs as fast as one calling forward_relu.
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
  // Named by its index ("3"), as PyTorch's nn.Sequential names its children.
  void push_back(std::shared_ptr<Module> module);
  template <typename M>
  void push_back(std::string name, const ModuleHolder<M>& holder) {
    push_back(std::move(name), std::static_pointer_cast<Module>(holder.ptr()));
  }
  // Names are unique; each dot-separated part is non-empty, and a prefix of a dotted name is not
  // itself an entry's name.
  void push_back(std::string name, std::shared_ptr<Module> module);
  void reset() override;  // clones re-register the same module types under the same names, then receive values
  Tensor forward(const Tensor& input) override;
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t index) const;
  // Entry `index`'s name: the one it was given, or its index.
  const std::string& name(size_t index) const;

 private:
  // The ModuleDict that holds entries named "<prefix>.<last part>", made on first use.
  Module& group_for(const std::string& prefix, const std::string& entry);

  std::vector<std::string> names_;
  std::vector<std::shared_ptr<Module>> modules_;
  std::vector<const Module*> groups_;  // the ModuleDicts made for dotted names
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
