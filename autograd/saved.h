// SavedTensor: a tensor a node keeps for its backward. It stores the data without autograd
// history (so an op's output saved in its own grad_fn makes no reference cycle) and the version
// at save time, so an in-place change before backward is an error instead of a wrong gradient.
#pragma once

#include <string>

#include "core/tensor.h"

namespace ember::autograd {

class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t)
      : data_(t.defined() ? t.detach() : Tensor()), version_(t.defined() ? t.version() : 0) {}

  // The saved value; raises naming `node` when it was modified in place after being saved, or
  // freed by an earlier backward.
  const Tensor& unpack(const std::string& node) const;
  void reset() {
    data_ = Tensor();
    released_ = true;
  }
  bool defined() const { return data_.defined(); }

  // While an active one lives on this thread, unpack() marks the saved tensor as used on its
  // device's current stream (core/runtime.h's record_stream). The engine makes one around a
  // backward that runs on another stream than its forward: a saved tensor allocated on the
  // forward's stream would otherwise go back to that stream's pool once freed, and be reused
  // there while the backward's kernels that read it are still queued.
  class UsedOnCurrentStream {
   public:
    explicit UsedOnCurrentStream(bool active);
    ~UsedOnCurrentStream();
    UsedOnCurrentStream(const UsedOnCurrentStream&) = delete;
    UsedOnCurrentStream& operator=(const UsedOnCurrentStream&) = delete;

   private:
    bool active_, previous_ = false;
  };

 private:
  Tensor data_;
  uint32_t version_ = 0;
  bool released_ = false;
};

}  // namespace ember::autograd
