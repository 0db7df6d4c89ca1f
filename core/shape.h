// Shape helpers: dim wrapping, numel, contiguous strides, broadcasting, formatting "[2, 3]".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace ember {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
// Maps a possibly negative dim into [0, ndim); raises naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// NumPy/PyTorch broadcasting of two shapes; raises naming `op` and both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
std::string shape_str(const Shape& shape);

}  // namespace ember
