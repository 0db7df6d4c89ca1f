// The checks behind SavedTensor::unpack, worded like PyTorch's so users recognise them, and the
// marking of saved tensors used by a backward on another stream.
#include "autograd/saved.h"

#include "core/runtime.h"

namespace ember::autograd {

namespace {

thread_local bool mark_used_on_current_stream = false;

void record_current_stream(const Tensor& t) {
  if (t.device().type == DeviceType::CPU) return;
  record_stream(t, current_stream(t.device()));
}

}  // namespace

SavedTensor::UsedOnCurrentStream::UsedOnCurrentStream(bool active) : active_(active) {
  if (!active_) return;
  previous_ = mark_used_on_current_stream;
  mark_used_on_current_stream = true;
}

SavedTensor::UsedOnCurrentStream::~UsedOnCurrentStream() {
  if (active_) mark_used_on_current_stream = previous_;
}

const Tensor& SavedTensor::unpack(const std::string& node) const {
  EMBER_CHECK(!released_, node,
              ": trying to backward through the graph a second time (or directly access saved "
              "tensors after they have already been freed). Saved intermediate values of the graph are freed when "
              "you call backward(); specify retain_graph=true if you need to backward through the graph a second time");
  if (!data_.defined()) return data_;
  EMBER_CHECK(data_.version() == version_, node,
              ": one of the variables needed for gradient computation has been "
              "modified by an inplace operation: [",
              dtype_name(data_.dtype()), " ", shape_str(data_.sizes()), "] is at version ", data_.version(),
              "; expected version ", version_, " instead");
  if (mark_used_on_current_stream) record_current_stream(data_);
  return data_;
}

}  // namespace ember::autograd
