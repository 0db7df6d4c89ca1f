// MPI datatype/op tables and the 16-bit float reduction functions.
#include "comm/mpi/mpi_types.h"

#include <algorithm>

#include "core/error.h"
#include "core/half.h"

namespace ember::comm::mpi {

namespace {

MPI_Op half_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};  // sum, min, max, product
MPI_Op bf16_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

template <typename T, int Which>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    float r = Which == 0 ? x + y : (Which == 1 ? std::min(x, y) : (Which == 2 ? std::max(x, y) : x * y));
    b[i] = T(r);
  }
}

template <typename T>
void create_set(MPI_Op* ops) {
  MPI_Op_create(&reduce16<T, 0>, 1, &ops[0]);
  MPI_Op_create(&reduce16<T, 1>, 1, &ops[1]);
  MPI_Op_create(&reduce16<T, 2>, 1, &ops[2]);
  MPI_Op_create(&reduce16<T, 3>, 1, &ops[3]);
}

int op_index(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return 0;
    case ReduceOp::Min:
      return 1;
    case ReduceOp::Max:
      return 2;
    case ReduceOp::Product:
      return 3;
  }
  return 0;
}

}  // namespace

MPI_Datatype datatype_of(DType dtype) {
  switch (dtype) {
    case kFloat32:
      return MPI_FLOAT;
    case kFloat64:
      return MPI_DOUBLE;
    case kInt64:
      return MPI_INT64_T;
    case kInt32:
      return MPI_INT32_T;
    case kUInt8:
      return MPI_UINT8_T;
    case kBool:
      return MPI_C_BOOL;
    case kBFloat16:
    case kFloat16:
      return MPI_UINT16_T;  // reduced by the user ops below
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op op_of(ReduceOp op, DType dtype) {
  if (dtype == kFloat16) return half_ops[op_index(op)];
  if (dtype == kBFloat16) return bf16_ops[op_index(op)];
  if (dtype == kBool) return (op == ReduceOp::Min || op == ReduceOp::Product) ? MPI_LAND : MPI_LOR;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return MPI_SUM;
    case ReduceOp::Min:
      return MPI_MIN;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Product:
      return MPI_PROD;
  }
  return MPI_SUM;
}

void create_custom_ops() {
  create_set<Half>(half_ops);
  create_set<BFloat16>(bf16_ops);
}

void free_custom_ops() {
  for (MPI_Op* set : {half_ops, bf16_ops})
    for (int i = 0; i < 4; ++i)
      if (set[i] != MPI_OP_NULL) MPI_Op_free(&set[i]);
}

}  // namespace ember::comm::mpi
