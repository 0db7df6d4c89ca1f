// ViewSpec: which view op made a tensor and with what arguments. Core applies it to geometry;
// autograd reads it to route the gradient back (reshape back, inverse permute, sum over
// expanded dims, scatter into a slice).
#pragma once

#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace ember {

struct ViewSpec {
  enum class Kind : uint8_t { Reshape, Permute, Expand, Slice, Select };
  Kind kind = Kind::Reshape;
  Shape shape;                           // Reshape / Expand: the target shape (fully resolved, no -1)
  std::vector<int64_t> dims;             // Permute
  int64_t dim = 0;                       // Slice / Select
  int64_t start = 0, end = 0, step = 1;  // Slice (normalised, end exclusive)
  int64_t index = 0;                     // Select (normalised)
};

}  // namespace ember
