// Copy (with dtype casts) and fill over strided loops.
#pragma once

#include "core/backend.h"

namespace ember::cuda {

void copy_kernel(const StridedLoop& loop);
void fill_kernel(const StridedLoop& loop, Scalar value);

}  // namespace ember::cuda
