// Binary ops, comparisons and where (formulas in core/elementwise_math.h).
#pragma once

#include "core/backend.h"

namespace ember::cuda {

void binary_kernel(BinaryOp op, const StridedLoop& loop);
void compare_kernel(CompareOp op, const StridedLoop& loop);
void where_kernel(const StridedLoop& loop);  // out, condition (bool), a, b

}  // namespace ember::cuda
