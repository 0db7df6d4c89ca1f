// The emulated NCCL's element types and reductions: sizes and names per ncclDataType_t, and the
// elementwise reduction of every rank's contribution in rank order, so that every rank computes
// the same bits (as NCCL's ring gives every rank the same result).
#pragma once

#include <cstddef>

#include "cuda/emu/nccl.h"

namespace ember::emu::nccl {

// 0 for the types the emulator does not support (the float8 types) and values out of range.
size_t element_size(ncclDataType_t type);
const char* type_name(ncclDataType_t type);
const char* op_name(ncclRedOp_t op);
bool valid_op(ncclRedOp_t op);

// out[i] = inputs[0][i] op inputs[1][i] op ... (nranks inputs of n elements), folded left in rank
// order. As in NCCL: 16-bit floats are combined in float and rounded back after every step (their
// partial sums travel between ranks as 16-bit values); ncclAvg scales each floating contribution
// by 1/nranks before summing (NCCL's pre-multiplied sum) and divides an integer sum afterwards;
// integer sums and products wrap.
void reduce(ncclDataType_t type, ncclRedOp_t op, int nranks, const void* const* inputs, void* out, size_t n);

}  // namespace ember::emu::nccl
