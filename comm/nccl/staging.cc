#include "comm/nccl/staging.h"

#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::comm::nccl {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case kFloat32: return ncclFloat32;
    case kFloat64: return ncclFloat64;
    case kBFloat16: return ncclBfloat16;
    case kFloat16: return ncclFloat16;
    case kInt64: return ncclInt64;
    case kInt32: return ncclInt32;
    case kUInt8: case kBool: return ncclUint8;  // bool: one byte, 0 or 1
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::Sum: return dtype == kBool ? ncclMax : ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Product: return dtype == kBool ? ncclMin : ncclProd;
  }
  return ncclSum;
}

void Staged::finish() const {
  if (write_back) copy_into(original, buffer);
}

Staged stage(const Tensor& t, bool write_back) {
  NoGradGuard no_grad;
  Staged s;
  s.original = t.detach();
  if (t.is_contiguous()) {
    s.buffer = s.original;
  } else {
    s.buffer = s.original.contiguous();
    s.write_back = write_back;
  }
  return s;
}

}  // namespace ember::comm::nccl
