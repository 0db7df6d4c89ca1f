// Device-neutral descriptions of strided loops handed to backend kernels. Operands are already
// broadcast to one shape (stride 0 on broadcast dims); dims are reordered by the first operand's
// strides, size-1 dims dropped and mergeable dims coalesced, innermost first. Strides are in bytes.
// A loop runs on `device` (its output's), on that device's current stream.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace ember {

constexpr int kMaxLoopDims = 16;
constexpr int kMaxLoopOperands = 4;

struct StridedLoop {
  Device device;
  // Bit k: operand k is a one-element CPU tensor (a 0-dim scalar such as `x * 0.5`, expanded)
  // in a loop on another device. data[k] is host memory: a kernel reads the value at launch.
  uint32_t host_scalars = 0;
  int ndim = 0;
  int noperands = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxLoopDims] = {};
  int64_t strides[kMaxLoopOperands][kMaxLoopDims] = {};
  char* data[kMaxLoopOperands] = {};
  DType dtypes[kMaxLoopOperands] = {};
};

// operands[0] is the output; the others must already have its shape (use expand to broadcast),
// and be on its device, or be a one-element CPU tensor (see host_scalars). Otherwise it raises
// "op: expected all tensors on cuda:0, got cpu for argument k", k counting the inputs from 1: ops
// check their arguments at entry (core/device_check.h), so this is the last line of defence.
StridedLoop make_loop(std::initializer_list<const Tensor*> operands, const char* op);

// A reduction of `in` into `out`: kept dims index the output, reduced dims are folded.
// Both lists are innermost first and coalesced. `out2` (optional) receives int64 indices.
struct ReduceLoop {
  Device device;
  int nkept = 0;
  int nreduced = 0;
  int64_t kept_sizes[kMaxLoopDims] = {};
  int64_t kept_out_strides[kMaxLoopDims] = {};
  int64_t kept_out2_strides[kMaxLoopDims] = {};
  int64_t kept_in_strides[kMaxLoopDims] = {};
  int64_t reduced_sizes[kMaxLoopDims] = {};
  int64_t reduced_in_strides[kMaxLoopDims] = {};
  int64_t kept_numel = 1;
  int64_t reduced_numel = 1;
  char* out = nullptr;
  char* out2 = nullptr;
  const char* in = nullptr;
  DType out_dtype = kFloat32;
  DType in_dtype = kFloat32;
};

// `out` (and `out2`) have `in`'s rank with size 1 on every reduced dim (keepdim layout).
ReduceLoop make_reduce_loop(const Tensor& out, const Tensor* out2, const Tensor& in, const std::vector<bool>& reduced,
                            const char* op);

}  // namespace ember
