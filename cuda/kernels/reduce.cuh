// Reductions over any set of dims (sum, mean, prod, amax, amin, p-norms) and the arg reductions.
#pragma once

#include "core/backend.h"

namespace ember::cuda {

void reduce_kernel(ReduceOp op, const ReduceLoop& loop, double p);
void arg_reduce_kernel(bool is_max, const ReduceLoop& loop);  // out values, out2 int64 indices

}  // namespace ember::cuda
