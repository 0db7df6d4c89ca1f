// Backends hand libraries one contiguous buffer per tensor: a strided tensor goes through a
// contiguous copy, written back after the collective when it is an output.
#pragma once

#include "core/tensor.h"

namespace ember::comm {

struct Staged {
  Tensor original;  // detached
  Tensor buffer;    // `original` itself when it was contiguous
  bool write_back = false;
  void* data() const { return buffer.data_ptr(); }
  // Copies the buffer into the original when it was a copy of an output (on a device, on the
  // current stream).
  void finish() const;
};

// The copy is made on the current stream; `write_back` marks an output.
Staged stage(const Tensor& t, bool write_back);

// Divides `t` in place by the group's size: an Avg reduction, for backends that sum.
void divide_by(const Tensor& t, int size);

}  // namespace ember::comm
