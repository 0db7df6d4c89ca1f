// Enumerations of the elementwise and reduction primitives. They are the vocabulary shared by
// the core ops, the backends' kernel tables and the autograd formulas.
#pragma once

#include <cstdint>

namespace ember {

// Unary ops take up to two scalar parameters (a, b): Clamp(min=a, max=b), PowScalar(exponent=a),
// LeakyRelu(slope=a). Unused parameters are ignored.
enum class UnaryOp : uint8_t {
  Neg,
  Exp,
  Log,
  Log1p,
  Sqrt,
  Rsqrt,
  Abs,
  Sign,
  Relu,
  Gelu,
  GeluTanh,
  Silu,
  Sigmoid,
  Tanh,
  Clamp,
  PowScalar,
  LeakyRelu,
  Reciprocal,
  Square,
  Sin,
  Cos,
  Erf,
  Floor,
  Ceil,
  Round,
  Expm1,
};
constexpr int kNumUnaryOps = static_cast<int>(UnaryOp::Expm1) + 1;
const char* unary_op_name(UnaryOp op);

// The unary ops that keep an integer dtype (the rest compute in float32 on integer inputs, as
// PyTorch's do), and of them the two bool takes. PowScalar keeps it for a whole non-negative
// exponent only (unary() decides that). Kernels instantiate integer loops for these alone.
constexpr bool unary_takes_integers(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
    case UnaryOp::Abs:
    case UnaryOp::Sign:
    case UnaryOp::Relu:
    case UnaryOp::Clamp:
    case UnaryOp::Square:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Round:
    case UnaryOp::PowScalar:
      return true;
    default:
      return false;
  }
}
constexpr bool unary_takes_bool(UnaryOp op) { return op == UnaryOp::Abs || op == UnaryOp::Relu; }

// Which of its input x and output y a unary op's backward formula reads: see
// formula::unary_grad_operand in core/elementwise_math.h, beside the formulas.
enum class UnaryGradOperand : uint8_t { None, Input, Output };

// AddRelu is max(a + b, 0) in one pass: a residual block's tail.
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Pow, Minimum, Maximum, AddRelu };
const char* binary_op_name(BinaryOp op);

enum class CompareOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };
const char* compare_op_name(CompareOp op);

// Sum/Mean/Prod/Amax/Amin/Norm reduce over any set of dims. Norm takes p (inf allowed).
// Var and Std take their correction (1 for the unbiased estimate) where Norm takes its p.
enum class ReduceOp : uint8_t { Sum, Mean, Prod, Amax, Amin, Norm, Var, Std };
const char* reduce_op_name(ReduceOp op);

}  // namespace ember
