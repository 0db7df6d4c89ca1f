#include "comm/nccl/nccl_types.h"

namespace ember::comm::nccl {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case kFloat32:
      return ncclFloat32;
    case kFloat64:
      return ncclFloat64;
    case kBFloat16:
      return ncclBfloat16;
    case kFloat16:
      return ncclFloat16;
    case kInt64:
      return ncclInt64;
    case kInt32:
      return ncclInt32;
    case kUInt8:
    case kBool:
      return ncclUint8;  // bool: one byte, 0 or 1
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::Sum:
      return dtype == kBool ? ncclMax : ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Product:
      return dtype == kBool ? ncclMin : ncclProd;
  }
  return ncclSum;
}

}  // namespace ember::comm::nccl
