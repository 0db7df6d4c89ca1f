// Gradients of the elementwise families: unary (one fused backward kernel), binary (reduced
// back to each input's broadcast shape and dtype) and where.
#include <cctype>
#include <cmath>

#include "autograd/function.h"
#include "autograd/ops/ops.h"
#include "autograd/saved.h"
#include "core/elementwise_math.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::autograd {

namespace {

// "exp" -> "ExpBackward0", PyTorch's naming for grad_fn.
std::string backward_name(const char* op) {
  std::string name;
  bool upper = true;
  for (const char* c = op; *c; ++c) {
    if (*c == '_') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(*c)) : *c;
    upper = false;
  }
  return name + "Backward0";
}

class UnaryBackward final : public Node {
 public:
  UnaryBackward(UnaryOp op, double a, double b, const Tensor& x, const Tensor& y)
      : op_(op), a_(a), b_(b), input_dtype_(x.dtype()) {
    // Save only what the formula reads: a saved tensor turns any later in-place change into an error.
    if (formula::unary_grad_operand(op) == UnaryGradOperand::Input) x_ = SavedTensor(x);
    if (formula::unary_grad_operand(op) == UnaryGradOperand::Output) y_ = SavedTensor(y);
  }
  std::string name() const override { return backward_name(unary_op_name(op_)); }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    Tensor gx = ember::unary_backward(op_, g, x_.unpack(name()), y_.unpack(name()), a_, b_);
    return {gx.to(input_dtype_)};
  }
  void release_saved() override {
    x_.reset();
    y_.reset();
  }

 private:
  UnaryOp op_;
  double a_, b_;
  SavedTensor x_, y_;
  DType input_dtype_;
};

class BinaryBackward final : public Node {
 public:
  BinaryBackward(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& y)
      : op_(op), a_shape_(a.sizes()), b_shape_(b.sizes()), a_dtype_(a.dtype()), b_dtype_(b.dtype()) {
    // Save only what the formulas of the wanted gradients read (x * w with w constant keeps w,
    // not x), so an in-place change to anything else stays legal.
    const bool want_a = a.requires_grad(), want_b = b.requires_grad();
    bool save_a = false, save_b = false, save_y = false;
    switch (op) {
      case BinaryOp::Add:
      case BinaryOp::Sub:
        break;
      case BinaryOp::Mul:
        save_a = want_b, save_b = want_a;
        break;
      case BinaryOp::Div:
        save_b = true, save_y = want_b;
        break;
      case BinaryOp::Pow:
        save_a = save_b = true, save_y = want_b;
        break;
      case BinaryOp::Minimum:
      case BinaryOp::Maximum:
        save_a = save_b = true;
        break;
      case BinaryOp::AddRelu:
        save_y = true;
        break;
    }
    if (save_a) a_ = SavedTensor(a);
    if (save_b) b_ = SavedTensor(b);
    if (save_y) y_ = SavedTensor(y);
  }
  std::string name() const override { return backward_name(binary_op_name(op_)); }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const bool want_a = needs_input_grad(*this, 0), want_b = needs_input_grad(*this, 1);
    Tensor ga, gb;
    switch (op_) {
      case BinaryOp::Add:
        if (want_a) ga = g;
        if (want_b) gb = g;
        break;
      case BinaryOp::Sub:
        if (want_a) ga = g;
        if (want_b) gb = -g;
        break;
      case BinaryOp::Mul:
        if (want_a) ga = g * b_.unpack(name());
        if (want_b) gb = g * a_.unpack(name());
        break;
      case BinaryOp::Div: {
        const Tensor& b = b_.unpack(name());
        if (want_a) ga = g / b;
        if (want_b) gb = -g * y_.unpack(name()) / b;
        break;
      }
      case BinaryOp::Pow: {
        // In the dtype the forward computed in (g's), as the forward converted them: log(a) of a
        // float32 base under a float64 result must not round to float32.
        const Tensor a = a_.unpack(name()).to(g.dtype());
        const Tensor b = b_.unpack(name()).to(g.dtype());
        if (want_a) {
          // b * a^(b-1), taken as 0 where b == 0 (PyTorch's convention).
          Tensor d = b * ember::pow(a, b - 1.0);
          ga = g * ember::where(b == zeros_like(b), zeros_like(d), d);
        }
        if (want_b) {
          // y * log(a), taken as 0 where a == 0 and b >= 0.
          const Tensor& y = y_.unpack(name());
          Tensor d = y * a.log();
          Tensor zero_base = (a == zeros_like(a)) * (b >= zeros_like(b));
          gb = g * ember::where(zero_base.to(kBool), zeros_like(d), d);
        }
        break;
      }
      case BinaryOp::Minimum:
      case BinaryOp::Maximum: {
        // The gradient goes to the chosen input; ties split it evenly, as PyTorch does.
        const Tensor& a = a_.unpack(name());
        const Tensor& b = b_.unpack(name());
        Tensor a_wins = op_ == BinaryOp::Maximum ? (a > b) : (a < b);
        Tensor share = a_wins.to(g.dtype()) + (a == b).to(g.dtype()) * 0.5;
        if (want_a) ga = g * share;
        if (want_b) gb = g * (1.0 - share);
        break;
      }
      case BinaryOp::AddRelu: {
        // One masked gradient serves both inputs (relu's backward, from the saved output).
        Tensor masked = unary_backward(UnaryOp::Relu, g, Tensor(), y_.unpack(name()), 0.0, 0.0);
        if (want_a) ga = masked;
        if (want_b) gb = masked;
        break;
      }
    }
    if (ga.defined()) ga = sum_to(ga, a_shape_).to(a_dtype_);
    if (gb.defined()) gb = sum_to(gb, b_shape_).to(b_dtype_);
    return {ga, gb};
  }

  void release_saved() override {
    a_.reset();
    b_.reset();
    y_.reset();
  }

 private:
  BinaryOp op_;
  Shape a_shape_, b_shape_;
  DType a_dtype_, b_dtype_;
  SavedTensor a_, b_, y_;
};

class WhereBackward final : public Node {
 public:
  WhereBackward(const Tensor& condition, const Tensor& a, const Tensor& b)
      : condition_(condition), a_shape_(a.sizes()), b_shape_(b.sizes()), a_dtype_(a.dtype()), b_dtype_(b.dtype()) {}
  std::string name() const override { return "WhereBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const Tensor& c = condition_.unpack(name());
    Tensor zero = zeros({}, g.options());
    Tensor ga, gb;
    if (needs_input_grad(*this, 0)) ga = sum_to(ember::where(c, g, zero), a_shape_).to(a_dtype_);
    if (needs_input_grad(*this, 1)) gb = sum_to(ember::where(c, zero, g), b_shape_).to(b_dtype_);
    return {ga, gb};
  }
  void release_saved() override { condition_.reset(); }

 private:
  SavedTensor condition_;
  Shape a_shape_, b_shape_;
  DType a_dtype_, b_dtype_;
};

}  // namespace

Tensor unary(UnaryOp op, const Tensor& x, double a, double b) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ember::unary(op, x, a, b);
  }
  if (!is_floating(y.dtype())) return y;
  auto node = std::make_shared<UnaryBackward>(op, a, b, x, y);
  connect(node, {&x});
  return attach(node, y);
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ember::binary(op, a, b);
  }
  if (!is_floating(y.dtype())) return y;
  auto node = std::make_shared<BinaryBackward>(op, a, b, y);
  connect(node, {&a, &b});
  return attach(node, y);
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ember::where(condition, a, b);
  }
  auto node = std::make_shared<WhereBackward>(condition, a, b);
  connect(node, {&a, &b});
  return attach(node, y);
}

}  // namespace ember::autograd
