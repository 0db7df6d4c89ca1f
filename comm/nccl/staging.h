// What the NCCL collectives share: Ember's dtypes and reduce ops as NCCL's, and contiguous
// staging of strided tensors.
#pragma once

#include "comm/process_group.h"
#include "core/tensor.h"
#include "cuda/nccl.h"

namespace ember::comm::nccl {

ncclDataType_t nccl_type(DType dtype);
// Bool has no NCCL type: as bytes, sum is "any" (max) and product "all" (min), as MPI's logical ops.
ncclRedOp_t nccl_op(ReduceOp op, DType dtype);

// A contiguous buffer for `t` on its device: t itself, or a copy made on the caller's stream.
// finish() copies it into t after the collective (call it on the NCCL stream).
struct Staged {
  Tensor original;
  Tensor buffer;
  bool write_back = false;
  void* data() const { return buffer.data_ptr(); }
  void finish() const;
};
Staged stage(const Tensor& t, bool write_back);

}  // namespace ember::comm::nccl
