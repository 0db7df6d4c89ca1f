// Small helpers shared by the autograd tests: float64 tensors from literals, values as vectors,
// and the message of the ember::Error an expression raises.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "core/ember_core.h"

namespace ember::testing {

inline Tensor f64(std::initializer_list<double> values, const Shape& shape = {}) {
  return tensor(std::vector<double>(values), shape);
}

inline Tensor leaf(std::initializer_list<double> values, const Shape& shape = {}) {
  return f64(values, shape).requires_grad_(true);
}

inline std::vector<double> values(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }

// The message of the ember::Error that `f` raises; "" when it raises none. Any other exception
// type propagates and fails the test.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace ember::testing
