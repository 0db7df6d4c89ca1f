// Gloo's reduction callbacks for Ember's dtypes: c[i] = a[i] op b[i] (c may be a). Gloo ships
// them for a few C++ types only; these cover every dtype the other backends reduce, with the
// same arithmetic: 16-bit floats combine in float32 and round once, bool sums and maxima are
// "or", minima and products "and", integers wrap.
#pragma once

#include <cstddef>

#include "comm/process_group.h"
#include "core/dtype.h"

namespace ember::comm::gloo_backend {

using ReduceFunction = void (*)(void* c, const void* a, const void* b, size_t n);

// Avg reduces as Sum (the caller divides afterwards).
ReduceFunction reduce_function(ReduceOp op, DType dtype);

}  // namespace ember::comm::gloo_backend
