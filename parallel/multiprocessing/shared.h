// multiprocessing::Shared: what spawn hands every worker, by name. Tensors and modules must be in
// shared memory already (share_memory_, Module::share_memory): the workers see the parent's
// memory, not a copy. Queues connect the processes; strings carry settings (a worker started by
// re-executing the program has none of the parent's variables).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "parallel/multiprocessing/queue.h"

namespace ember::multiprocessing {

class Shared {
 public:
  // ---- in the parent, before spawn ----
  Shared& add(const std::string& name, const Tensor& tensor);
  // Every parameter and buffer of `module`, under "name.<key>".
  Shared& add(const std::string& name, const nn::Module& module);
  Shared& add(const std::string& name, const Queue& queue);
  Shared& set(const std::string& name, const std::string& value);

  // ---- in a worker (also in the parent: the same objects) ----
  Tensor tensor(const std::string& name) const;
  Queue queue(const std::string& name) const;
  const std::string& get(const std::string& name) const;
  // Points the parameters and buffers of the worker's own `module` (built like the parent's) at
  // the shared ones, keeping each parameter's identity so optimizers built after see them. An
  // Error names every missing, extra or mismatched key.
  void attach(const std::string& name, nn::Module& module) const;

  // ---- for spawn ----
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  const std::map<std::string, Queue>& queues() const { return queues_; }
  const std::map<std::string, std::string>& strings() const { return strings_; }
  std::map<std::string, Tensor>& mutable_tensors() { return tensors_; }
  std::map<std::string, Queue>& mutable_queues() { return queues_; }
  std::map<std::string, std::string>& mutable_strings() { return strings_; }

 private:
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, Queue> queues_;
  std::map<std::string, std::string> strings_;
};

}  // namespace ember::multiprocessing
