// Internal view machinery shared by core ops and the autograd view formulas.
#pragma once

#include "core/tensor.h"
#include "core/view_spec.h"

namespace ember {

// Resolves one -1 in `shape` against `numel`; raises naming `op` when impossible.
Shape infer_size(const Shape& shape, int64_t numel, const char* op);
// The geometry change alone, never recorded by autograd.
Tensor apply_view(const Tensor& x, const ViewSpec& spec);
// apply_view, recorded by autograd when x requires grad.
Tensor make_view(const Tensor& x, const ViewSpec& spec);
// Whether x can be viewed as `shape` without copying.
bool can_view(const Tensor& x, const Shape& shape);

}  // namespace ember
