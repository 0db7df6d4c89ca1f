// Random fills: the CPU backend's numbers for the same (seed, offset) (core/random_math.h).
#pragma once

#include "core/backend.h"

namespace ember::cuda {

void random_kernel(RandomKind kind, Device device, void* data, DType dtype, int64_t numel, PhiloxState state,
                   double a, double b);

}  // namespace ember::cuda
