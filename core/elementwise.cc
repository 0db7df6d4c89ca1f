// Elementwise ops: dtype promotion, broadcasting, output allocation, then one kernel call.
#include <cmath>
#include <limits>

#include "core/autocast.h"
#include "core/autograd_hooks.h"
#include "core/backend.h"
#include "core/device_check.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember {

namespace {

// Priority of an operand in promotion: dimensioned tensor > 0-dim tensor > Python-style scalar.
enum class Priority { Scalar = 0, ZeroDim = 1, Dimensioned = 2 };

int category(DType d) { return d == kBool ? 0 : (is_floating(d) ? 2 : 1); }

struct PromotionState {
  DType best[3] = {kBool, kBool, kBool};  // read only where seen; set so -O2 sees it initialised
  bool seen[3] = {false, false, false};
  void add(DType d, Priority p) {
    int i = static_cast<int>(p);
    best[i] = seen[i] ? promote_types(best[i], d) : d;
    seen[i] = true;
  }
  DType result() const {
    DType out = kBool;
    bool have = false;
    for (int i = 2; i >= 0; --i) {
      if (!seen[i]) continue;
      if (!have) {
        out = best[i];
        have = true;
      } else if (category(best[i]) > category(out)) {
        // A lower-priority operand only lifts the category: a 0-dim tensor brings its own
        // dtype, a scalar the category's default (float32, int64).
        out = i == static_cast<int>(Priority::Scalar) ? (category(best[i]) == 2 ? kFloat32 : kInt64) : best[i];
      }
    }
    return out;
  }
};

Priority priority_of(const Tensor& t) { return t.dim() == 0 ? Priority::ZeroDim : Priority::Dimensioned; }

// `a` is the op's first parameter: integers raised to a whole, non-negative power stay integers
// (torch.pow(int_tensor, 2) is an integer tensor).
bool floating_only(UnaryOp op, double a) {
  if (op == UnaryOp::PowScalar) return !(a >= 0 && a == std::floor(a));
  return !unary_takes_integers(op);
}

// An output for an elementwise op: it takes the layout of `like` (e.g. channels-last) when
// `like` already has the output's shape and is dense, as PyTorch does.
Tensor alloc_output(const Shape& shape, const TensorOptions& options, const Tensor& like) {
  if (like.defined() && like.sizes() == shape && !like.is_contiguous() && is_dense(like))
    return empty_strided(shape, like.strides(), options);
  return empty(shape, options);
}

Tensor pick_layout(const Tensor& a, const Tensor& b, const Shape& shape) {
  if (a.sizes() == shape && !a.is_contiguous() && is_dense(a)) return a;
  if (b.sizes() == shape && !b.is_contiguous() && is_dense(b)) return b;
  return Tensor();
}

}  // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  PromotionState s;
  s.add(a.dtype(), priority_of(a));
  s.add(b.dtype(), priority_of(b));
  return s.result();
}

DType result_type(const Tensor& a, Scalar b) {
  PromotionState s;
  s.add(a.dtype(), priority_of(a));
  s.add(b.natural_dtype(), Priority::Scalar);
  return s.result();
}

Tensor scalar_tensor(Scalar value, DType dtype, Device device) {
  NoGradGuard no_grad;
  return full({}, value, TensorOptions(dtype).device(device));
}

namespace {

// The unary ops EMBER_AUTOCAST_OPS names.
std::optional<autocast::Op> autocast_op(UnaryOp op) {
  switch (op) {
    case UnaryOp::Exp:
      return autocast::Op::exp;
    case UnaryOp::Expm1:
      return autocast::Op::expm1;
    case UnaryOp::Log:
      return autocast::Op::log;
    case UnaryOp::Log1p:
      return autocast::Op::log1p;
    case UnaryOp::Reciprocal:
      return autocast::Op::reciprocal;
    case UnaryOp::Rsqrt:
      return autocast::Op::rsqrt;
    case UnaryOp::PowScalar:
      return autocast::Op::pow;
    default:
      return std::nullopt;
  }
}

}  // namespace

Tensor unary(UnaryOp op, const Tensor& x, double a, double b) {
  if (autocast::active())
    if (std::optional<autocast::Op> rule = autocast_op(op))
      if (autocast::Scope cast{*rule, {&x}}) return unary(op, cast[0], a, b);
  if (needs_grad({&x})) return autograd_hooks()->unary(op, x, a, b);
  const char* name = unary_op_name(op);
  EMBER_CHECK(x.dtype() != kBool || unary_takes_bool(op), name, ": expected a numeric tensor, got dtype bool");
  DType dtype = (floating_only(op, a) && !is_floating(x.dtype())) ? kFloat32 : x.dtype();
  Tensor input = x.dtype() == dtype ? x : x.to(dtype);
  Tensor out = alloc_output(x.sizes(), TensorOptions(dtype).device(x.device()), x);
  if (out.numel() == 0) return out;
  StridedLoop loop = make_loop({&out, &input}, name);
  kernels_for(x.device(), name).unary(op, loop, a, b);
  return out;
}

Tensor unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, double a, double b) {
  const char* name = unary_op_name(op);
  Tensor out = alloc_output(grad.sizes(), grad.options(), grad);
  if (out.numel() == 0) return out;
  // The kernel reads every operand; one the formula ignores may be absent, and grad stands in.
  const Tensor& xs = x.defined() ? x : grad;
  const Tensor& ys = y.defined() ? y : grad;
  Tensor gx = xs.to(grad.dtype()).expand(grad.sizes()), gy = ys.to(grad.dtype()).expand(grad.sizes());
  StridedLoop loop = make_loop({&out, &grad, &gx, &gy}, name);
  kernels_for(grad.device(), name).unary_backward(op, loop, a, b);
  return out;
}

// Writes op(a, b) into `out`, whose shape must be the broadcast shape and whose dtype is the
// compute dtype. `out` may alias a (in-place ops).
static void binary_into(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  Tensor ea = (a.dtype() == out.dtype() ? a : a.to(out.dtype())).expand(out.sizes());
  Tensor eb = (b.dtype() == out.dtype() ? b : b.to(out.dtype())).expand(out.sizes());
  if (out.numel() == 0) return;
  StridedLoop loop = make_loop({&out, &ea, &eb}, name);
  kernels_for(out.device(), name).binary(op, loop);
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  // A 0-dim CPU tensor (`x * 0.5`) joins tensors on another device: the kernel reads it at launch.
  const Device device = common_device(name, {a, b}, CpuScalars::Allowed);
  if (needs_grad({&a, &b})) return autograd_hooks()->binary(op, a, b);
  DType dtype = result_type(a, b);
  if (op == BinaryOp::Div && !is_floating(dtype)) dtype = kFloat32;  // true division
  EMBER_CHECK(dtype != kBool || op == BinaryOp::Minimum || op == BinaryOp::Maximum || op == BinaryOp::Mul ||
                  op == BinaryOp::Add,
              name, ": not supported for bool tensors");
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  Tensor out = alloc_output(shape, TensorOptions(dtype).device(device), pick_layout(a, b, shape));
  binary_into(op, out, a, b);
  return out;
}

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
  const char* name = compare_op_name(op);
  const Device device = common_device(name, {a, b}, CpuScalars::Allowed);
  DType dtype = result_type(a, b);
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  Tensor out = empty(shape, TensorOptions(kBool).device(device));
  if (out.numel() == 0) return out;
  Tensor ea = a.detach().to(dtype).expand(shape), eb = b.detach().to(dtype).expand(shape);
  StridedLoop loop = make_loop({&out, &ea, &eb}, name);
  kernels_for(device, name).compare(op, loop);
  return out;
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  const Device device = common_device("where", {condition, a, b}, CpuScalars::Allowed);
  EMBER_CHECK(condition.dtype() == kBool, "where: expected condition to be a bool tensor, got ",
              dtype_name(condition.dtype()));
  if (needs_grad({&a, &b})) return autograd_hooks()->where(condition, a, b);
  DType dtype = result_type(a, b);
  Shape shape = broadcast_shapes(broadcast_shapes(condition.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor out = empty(shape, TensorOptions(dtype).device(device));
  if (out.numel() == 0) return out;
  Tensor ec = condition.expand(shape), ea = a.to(dtype).expand(shape), eb = b.to(dtype).expand(shape);
  StridedLoop loop = make_loop({&out, &ec, &ea, &eb}, "where");
  kernels_for(device, "where").where(loop);
  return out;
}

// b * alpha in the dtype a op b computes in, float32 for 16-bit dtypes: scaling in b's own dtype
// first would round the product (p.add_(bfloat16_grad, -lr) on a float32 p must not round
// lr * grad to bfloat16), and a 16-bit a + alpha * b rounds once, at the end, as PyTorch's does.
// A 0-dim product is expanded to a's shape (on a's device): as a 0-dim float32 operand it would
// not promote a 16-bit a, and would round to a's dtype before the sum.
static Tensor scaled(const Tensor& a, const Tensor& b, Scalar alpha) {
  DType dtype = result_type(a, b);
  if (dtype == kBFloat16 || dtype == kFloat16) dtype = kFloat32;
  Tensor product = (b.dtype() == dtype ? b : b.to(dtype)) * alpha;
  if (product.dim() == 0 && a.dim() > 0 && result_type(a, product) != product.dtype())
    product = (product.device() == a.device() ? product : product.to(a.device())).expand(a.sizes());
  return product;
}

// a op alpha * b in the result dtype of a and b.
static Tensor add_scaled(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha) {
  const DType dtype = result_type(a, b);
  Tensor out = binary(op, a, scaled(a, b, alpha));
  return out.dtype() == dtype ? out : out.to(dtype);
}

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  if (alpha.to_double() == 1.0) return binary(BinaryOp::Add, a, b);
  return add_scaled(BinaryOp::Add, a, b, alpha);
}

Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  if (alpha.to_double() == 1.0) return binary(BinaryOp::Sub, a, b);
  return add_scaled(BinaryOp::Sub, a, b, alpha);
}

Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) {
  if (autocast::Scope cast{autocast::Op::pow, {&a, &b}}) return pow(cast[0], cast[1]);
  return binary(BinaryOp::Pow, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Minimum, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Maximum, a, b); }
Tensor add_relu(const Tensor& a, const Tensor& b) { return binary(BinaryOp::AddRelu, a, b); }

Tensor pow(const Tensor& a, Scalar exponent) {
  if (autocast::Scope cast{autocast::Op::pow, {&a}}) return pow(cast[0], exponent);
  DType dtype = result_type(a, exponent);
  EMBER_CHECK(is_floating(dtype) || exponent.to_int() >= 0,
              "pow: integers to negative integer powers are not "
              "allowed, got ",
              dtype_name(a.dtype()), " tensor to the power ", exponent.to_int());
  const Tensor& base = a.dtype() == dtype ? a : a.to(dtype);
  return unary(UnaryOp::PowScalar, base, exponent.to_double());
}

// PyTorch's promotion: a bound of a higher category lifts the tensor's dtype (an integer tensor
// clamped to 0.5 computes, and returns, float32).
static DType clamp_result_type(const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  DType dtype = x.dtype();
  for (const std::optional<Scalar>* bound : {&min, &max})
    if (bound->has_value()) dtype = promote_types(dtype, result_type(x, **bound));
  return dtype;
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  EMBER_CHECK(min.has_value() || max.has_value(), "clamp: at least one of 'min' or 'max' must not be None");
  const double inf = std::numeric_limits<double>::infinity();
  const DType dtype = clamp_result_type(x, min, max);
  return unary(UnaryOp::Clamp, x.dtype() == dtype ? x : x.to(dtype), min ? min->to_double() : -inf,
               max ? max->to_double() : inf);
}

// ---- in place: computed into self's memory; through autograd when a gradient is involved ----

namespace {

// PyTorch's canCast: a result may be written into a narrower dtype of its own category
// (float32 += float64), never into a lower category (int += float, bool += int).
void check_inplace_dtype(const Tensor& self, DType result, const char* op) {
  EMBER_CHECK(category(result) <= category(self.dtype()), op, ": result type ", dtype_name(result),
              " can't be cast to the desired output type ", dtype_name(self.dtype()));
}

// Whether `source` may read memory that writing `self` element by element changes first
// (m.sub_(m[0]), x.copy_(x.t())). Identical views are safe: each element is read before it is
// written. Conservative: any other view of the same storage counts.
bool may_overlap(const Tensor& self, const Tensor& source) {
  return self.storage() == source.storage() && !(self.storage_offset() == source.storage_offset() &&
                                                 self.sizes() == source.sizes() && self.strides() == source.strides());
}

// Moves `out_of_place(current)` into self. With grad recording on, autograd takes over: the
// formula sees a recorded clone of self (so a node that saves self's old value keeps it), and
// self inherits the result's history. Otherwise `direct()` writes self's memory in place.
template <typename OutOfPlace, typename Direct>
Tensor& inplace(Tensor& self, std::initializer_list<const Tensor*> inputs, const char* op, bool uses_old_value,
                OutOfPlace out_of_place, Direct direct) {
  autocast::Hold no_autocast;  // in-place ops keep self's dtype, as PyTorch's autocast leaves them
  bool grad = false;
  if (autograd_hooks() != nullptr && GradMode::is_enabled()) {
    grad = any_requires_grad(self);
    for (const Tensor* t : inputs) grad = grad || any_requires_grad(*t);
  }
  if (grad) {
    Tensor result = out_of_place(uses_old_value ? self.clone() : self);
    autograd_hooks()->rebase_inplace(self, result.to(self.dtype()), op);
    return self;
  }
  direct();
  self.bump_version();
  return self;
}

}  // namespace

static Tensor& binary_inplace(Tensor& self, BinaryOp op, const Tensor& other, const char* name) {
  check_devices(name, self.device(), {self, other}, CpuScalars::Allowed);
  DType dtype = result_type(self, other);
  if (op == BinaryOp::Div && !is_floating(dtype)) dtype = kFloat32;
  check_inplace_dtype(self, dtype, name);
  Shape shape = broadcast_shapes(self.sizes(), other.sizes(), name);
  EMBER_CHECK(shape == self.sizes(), name, ": output with shape ", shape_str(self.sizes()),
              " doesn't match the broadcast shape ", shape_str(shape));
  return inplace(
      self, {&other}, name, true, [&](const Tensor& current) { return binary(op, current, other); },
      [&] {
        if (self.numel() == 0) return;
        if (dtype == self.dtype() && !may_overlap(self, other)) {
          binary_into(op, self, self, other);
        } else {
          NoGradGuard no_grad;
          copy_into(self, binary(op, self, other));
        }
      });
}

Tensor& Tensor::add_(const Tensor& other, Scalar alpha) {
  if (alpha.to_double() == 1.0) return binary_inplace(*this, BinaryOp::Add, other, "add_");
  return binary_inplace(*this, BinaryOp::Add, scaled(*this, other, alpha), "add_");
}

Tensor& Tensor::sub_(const Tensor& other, Scalar alpha) {
  if (alpha.to_double() == 1.0) return binary_inplace(*this, BinaryOp::Sub, other, "sub_");
  return binary_inplace(*this, BinaryOp::Sub, scaled(*this, other, alpha), "sub_");
}

Tensor& Tensor::mul_(const Tensor& other) { return binary_inplace(*this, BinaryOp::Mul, other, "mul_"); }
Tensor& Tensor::div_(const Tensor& other) { return binary_inplace(*this, BinaryOp::Div, other, "div_"); }
// Scalars stay on the host whatever self's device: the kernel takes the value at launch.
Tensor& Tensor::add_(Scalar other) { return add_(scalar_tensor(other, result_type(*this, other), Device(kCPU))); }
Tensor& Tensor::mul_(Scalar other) { return mul_(scalar_tensor(other, result_type(*this, other), Device(kCPU))); }

Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  EMBER_CHECK(min.has_value() || max.has_value(), "clamp_: at least one of 'min' or 'max' must not be None");
  check_inplace_dtype(*this, clamp_result_type(*this, min, max), "clamp_");
  return inplace(
      *this, {}, "clamp_", true, [&](const Tensor& current) { return ember::clamp(current, min, max); },
      [&] {
        NoGradGuard no_grad;
        const double inf = std::numeric_limits<double>::infinity();
        if (numel() == 0) return;
        StridedLoop loop = make_loop({this, this}, "clamp_");
        kernels_for(device(), "clamp_")
            .unary(UnaryOp::Clamp, loop, min ? min->to_double() : -inf, max ? max->to_double() : inf);
      });
}

Tensor& Tensor::relu_() {
  return inplace(
      *this, {}, "relu_", true, [&](const Tensor& current) { return current.relu(); },
      [&] {
        if (numel() == 0) return;
        StridedLoop loop = make_loop({this, this}, "relu_");
        kernels_for(device(), "relu_").unary(UnaryOp::Relu, loop, 0, 0);
      });
}

Tensor& Tensor::fill_(Scalar value) {
  return inplace(
      *this, {}, "fill_", false, [&](const Tensor&) { return full(sizes(), value, options()); },
      [&] {
        if (numel() == 0) return;
        StridedLoop loop = make_loop({this}, "fill_");
        kernels_for(device(), "fill_").fill(loop, value);
      });
}

Tensor& Tensor::zero_() { return fill_(0); }

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  return inplace(
      *this, {&src}, "copy_", false,
      [&](const Tensor&) { return src.to(dtype()).to(device()).expand(sizes()).clone(); },
      [&] { copy_into(*this, may_overlap(*this, src) ? src.clone() : src, non_blocking); });
}

}  // namespace ember
