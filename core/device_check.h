// The device check every op runs on its tensor arguments at entry, before any work, so that a
// mismatch raises one Error naming the op the user called, both devices and the argument:
//   "conv2d: expected all tensors on cuda:0, got cpu for argument 'bias'"
#pragma once

#include <initializer_list>
#include <string>

#include "core/tensor.h"

namespace ember {

// One tensor argument of an op; `name` is the parameter's, as the user reads it in the signature
// (errors then say "argument 'bias'", else "argument 3", counting from 1 in list order).
struct TensorArg {
  TensorArg(const Tensor& t, const char* name = nullptr) : tensor(&t), name(name) {}  // NOLINT: {x, w}
  const Tensor* tensor;
  const char* name;
};

// PyTorch's rule for elementwise ops: a 0-dim CPU tensor (`x * 0.5` on a GPU) may join tensors on
// another device; its value is read at launch (make_loop's host_scalars).
enum class CpuScalars { Rejected, Allowed };

// The device the op runs on: that of the first defined argument that is not an allowed CPU scalar
// (the CPU when there is none). Every other defined argument must be there too; undefined ones
// (an absent bias) are skipped.
Device common_device(const char* op, std::initializer_list<TensorArg> args, CpuScalars scalars = CpuScalars::Rejected);
// The same with the device given: an in-place op's destination's, a leaf's (set_grad).
void check_devices(const char* op, Device device, std::initializer_list<TensorArg> args,
                   CpuScalars scalars = CpuScalars::Rejected);
// The Error itself, for checks with their own rule or numbering (make_loop, cat):
// "op: expected all tensors on <expected>, got <got> for <which>".
[[noreturn]] void device_mismatch(const char* op, Device expected, Device got, const std::string& which);

}  // namespace ember
