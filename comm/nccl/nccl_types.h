// Ember's dtypes and reduce ops as NCCL's.
#pragma once

#include "comm/process_group.h"
#include "core/dtype.h"
#include "cuda/nccl.h"

namespace ember::comm::nccl {

ncclDataType_t nccl_type(DType dtype);
// Bool has no NCCL type: as bytes, sum is "any" (max) and product "all" (min), as MPI's logical ops.
ncclRedOp_t nccl_op(ReduceOp op, DType dtype);

}  // namespace ember::comm::nccl
