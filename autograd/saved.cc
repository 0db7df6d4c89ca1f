// The checks behind SavedTensor::unpack, worded like PyTorch's so users recognise them.
#include "autograd/saved.h"

namespace ember::autograd {

const Tensor& SavedTensor::unpack(const std::string& node) const {
  EMBER_CHECK(!released_, node, ": trying to backward through the graph a second time (or directly access saved "
              "tensors after they have already been freed). Saved intermediate values of the graph are freed when "
              "you call backward(); specify retain_graph=true if you need to backward through the graph a second time");
  if (!data_.defined()) return data_;
  EMBER_CHECK(data_.version() == version_, node, ": one of the variables needed for gradient computation has been "
              "modified by an inplace operation: [", dtype_name(data_.dtype()), " ", shape_str(data_.sizes()),
              "] is at version ", data_.version(), "; expected version ", version_, " instead");
  return data_;
}

}  // namespace ember::autograd
