// Unary ops and their one-pass backward (formulas in core/elementwise_math.h).
#pragma once

#include "core/backend.h"

namespace ember::cuda {

void unary_kernel(UnaryOp op, const StridedLoop& loop, double a, double b);
// Operands: grad_in (out), grad_out, x, y.
void unary_backward_kernel(UnaryOp op, const StridedLoop& loop, double a, double b);

}  // namespace ember::cuda
