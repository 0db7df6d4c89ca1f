// Printable names of the primitive kinds, used in error messages and grad_fn names.
#include "core/op_kinds.h"

namespace ember {

const char* unary_op_name(UnaryOp op) {
  static const char* names[] = {"neg",   "exp",   "log",        "log1p",      "sqrt",   "rsqrt",   "abs",
                                "sign",  "relu",  "gelu",       "gelu_tanh",  "silu",   "sigmoid", "tanh",
                                "clamp", "pow",   "leaky_relu", "reciprocal", "square", "sin",     "cos",
                                "erf",   "floor", "ceil",       "round",      "expm1"};
  return names[static_cast<int>(op)];
}

const char* binary_op_name(BinaryOp op) {
  static const char* names[] = {"add", "sub", "mul", "div", "pow", "minimum", "maximum", "add_relu"};
  return names[static_cast<int>(op)];
}

const char* compare_op_name(CompareOp op) {
  static const char* names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  return names[static_cast<int>(op)];
}

const char* reduce_op_name(ReduceOp op) {
  static const char* names[] = {"sum", "mean", "prod", "amax", "amin", "norm", "var", "std"};
  return names[static_cast<int>(op)];
}

}  // namespace ember
