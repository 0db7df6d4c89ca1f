// Mapping Ember dtypes and reduce ops onto MPI: native datatypes where MPI has them, and
// user-defined reduction ops for bfloat16 / float16 (summed in float, rounded once per step).
#pragma once

#include <mpi.h>

#include "comm/process_group.h"
#include "core/dtype.h"

namespace ember::comm::mpi {

MPI_Datatype datatype_of(DType dtype);
// Avg is reduced as Sum and divided afterwards; bool maps Sum/Max to logical or, Min/Product to and.
MPI_Op op_of(ReduceOp op, DType dtype);
// Creates the user ops; call once after MPI_Init on the communication thread.
void create_custom_ops();
void free_custom_ops();

}  // namespace ember::comm::mpi
