// multiprocessing::Queue: tensors between processes on one machine, as torch.multiprocessing's.
// A shared tensor (share_memory_) travels as a handle: the receiver sees the same memory. Any
// other tensor travels by copy: the receiver gets its own. Either way the message is a few
// hundred bytes plus one descriptor, which the receiver closes once it has mapped the memory,
// so a long run does not exhaust descriptors.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "core/tensor.h"

namespace ember::multiprocessing {

class Queue {
 public:
  // Create it before spawn and pass it in Shared: the workers and the parent then share it.
  // Every process may put and get (many producers, many consumers); each tensor is got once.
  Queue();
  ~Queue();
  Queue(const Queue&) = default;
  Queue& operator=(const Queue&) = default;

  // Blocks while the queue is full (the kernel's socket buffer, some hundreds of messages).
  void put(const Tensor& tensor);
  // Blocks until a tensor arrives; raises an ember::Error after `timeout` (forever if none).
  Tensor get(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Non-blocking: nothing when the queue is empty.
  std::optional<Tensor> try_get();

  // For Shared: the descriptors of the queue's socket, and the queue made from received ones.
  struct Ends;
  explicit Queue(std::shared_ptr<Ends> ends) : ends_(std::move(ends)) {}
  const std::shared_ptr<Ends>& ends() const { return ends_; }

 private:
  std::shared_ptr<Ends> ends_;
};

}  // namespace ember::multiprocessing
