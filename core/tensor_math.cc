// Tensor's math methods and the arithmetic operators: thin forwards to the free functions.
#include <limits>

#include "core/factory.h"
#include "core/ops.h"

namespace ember {

namespace {
// On the host whatever t's device: kernels read a scalar operand's value at launch.
Tensor scalar_like(const Tensor& t, Scalar value) { return scalar_tensor(value, result_type(t, value), Device(kCPU)); }
}  // namespace

Tensor Tensor::add(const Tensor& other, Scalar alpha) const { return ember::add(*this, other, alpha); }
Tensor Tensor::sub(const Tensor& other, Scalar alpha) const { return ember::sub(*this, other, alpha); }
Tensor Tensor::mul(const Tensor& other) const { return ember::mul(*this, other); }
Tensor Tensor::div(const Tensor& other) const { return ember::div(*this, other); }
Tensor Tensor::pow(const Tensor& exponent) const { return ember::pow(*this, exponent); }
Tensor Tensor::pow(Scalar exponent) const { return ember::pow(*this, exponent); }
Tensor Tensor::neg() const { return unary(UnaryOp::Neg, *this); }
Tensor Tensor::exp() const { return unary(UnaryOp::Exp, *this); }
Tensor Tensor::log() const { return unary(UnaryOp::Log, *this); }
Tensor Tensor::log1p() const { return unary(UnaryOp::Log1p, *this); }
Tensor Tensor::expm1() const { return unary(UnaryOp::Expm1, *this); }
Tensor Tensor::sqrt() const { return unary(UnaryOp::Sqrt, *this); }
Tensor Tensor::rsqrt() const { return unary(UnaryOp::Rsqrt, *this); }
Tensor Tensor::abs() const { return unary(UnaryOp::Abs, *this); }
Tensor Tensor::sign() const { return unary(UnaryOp::Sign, *this); }
Tensor Tensor::reciprocal() const { return unary(UnaryOp::Reciprocal, *this); }
Tensor Tensor::square() const { return unary(UnaryOp::Square, *this); }
Tensor Tensor::sin() const { return unary(UnaryOp::Sin, *this); }
Tensor Tensor::cos() const { return unary(UnaryOp::Cos, *this); }
Tensor Tensor::erf() const { return unary(UnaryOp::Erf, *this); }
Tensor Tensor::floor() const { return unary(UnaryOp::Floor, *this); }
Tensor Tensor::ceil() const { return unary(UnaryOp::Ceil, *this); }
Tensor Tensor::round() const { return unary(UnaryOp::Round, *this); }
Tensor Tensor::relu() const { return unary(UnaryOp::Relu, *this); }
Tensor Tensor::gelu(bool tanh_approximation) const {
  return unary(tanh_approximation ? UnaryOp::GeluTanh : UnaryOp::Gelu, *this);
}
Tensor Tensor::silu() const { return unary(UnaryOp::Silu, *this); }
Tensor Tensor::sigmoid() const { return unary(UnaryOp::Sigmoid, *this); }
Tensor Tensor::tanh() const { return unary(UnaryOp::Tanh, *this); }
Tensor Tensor::leaky_relu(double negative_slope) const { return unary(UnaryOp::LeakyRelu, *this, negative_slope); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return ember::clamp(*this, min, max);
}
Tensor Tensor::minimum(const Tensor& other) const { return ember::minimum(*this, other); }
Tensor Tensor::maximum(const Tensor& other) const { return ember::maximum(*this, other); }
Tensor Tensor::eq(const Tensor& other) const { return compare(CompareOp::Eq, *this, other); }
Tensor Tensor::ne(const Tensor& other) const { return compare(CompareOp::Ne, *this, other); }
Tensor Tensor::lt(const Tensor& other) const { return compare(CompareOp::Lt, *this, other); }
Tensor Tensor::le(const Tensor& other) const { return compare(CompareOp::Le, *this, other); }
Tensor Tensor::gt(const Tensor& other) const { return compare(CompareOp::Gt, *this, other); }
Tensor Tensor::ge(const Tensor& other) const { return compare(CompareOp::Ge, *this, other); }
Tensor Tensor::logical_not() const { return compare(CompareOp::Eq, *this, scalar_tensor(0, dtype(), Device(kCPU))); }

Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const { return ember::sum(*this, dims, keepdim); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const { return ember::mean(*this, dims, keepdim); }
Tensor Tensor::prod(const std::vector<int64_t>& dims, bool keepdim) const {
  return reduce(ReduceOp::Prod, *this, dims, keepdim);
}
Tensor Tensor::var(const std::vector<int64_t>& dims, bool unbiased, bool keepdim) const {
  return ember::var(*this, dims, unbiased ? 1 : 0, keepdim);
}
Tensor Tensor::std(const std::vector<int64_t>& dims, bool unbiased, bool keepdim) const {
  return ember::standard_deviation(*this, dims, unbiased ? 1 : 0, keepdim);
}
Tensor Tensor::norm(double p, const std::vector<int64_t>& dims, bool keepdim) const {
  return reduce(ReduceOp::Norm, *this, dims, keepdim, p);
}
Tensor Tensor::logsumexp(const std::vector<int64_t>& dims, bool keepdim) const {
  return ember::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::amax(const std::vector<int64_t>& dims, bool keepdim) const {
  return reduce(ReduceOp::Amax, *this, dims, keepdim);
}
Tensor Tensor::amin(const std::vector<int64_t>& dims, bool keepdim) const {
  return reduce(ReduceOp::Amin, *this, dims, keepdim);
}
Tensor Tensor::max() const { return amax(); }
Tensor Tensor::min() const { return amin(); }
std::pair<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return max_dim(*this, dim, keepdim); }
std::pair<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return min_dim(*this, dim, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return ember::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return ember::argmin(*this, dim, keepdim); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return a.neg(); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, scalar_like(a, b)); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, scalar_like(a, b)); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, scalar_like(a, b)); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, scalar_like(a, b)); }
Tensor operator+(Scalar a, const Tensor& b) { return add(scalar_like(b, a), b); }
Tensor operator-(Scalar a, const Tensor& b) { return sub(scalar_like(b, a), b); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(scalar_like(b, a), b); }
Tensor operator/(Scalar a, const Tensor& b) { return div(scalar_like(b, a), b); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return compare(CompareOp::Eq, a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return compare(CompareOp::Ne, a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return compare(CompareOp::Lt, a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return compare(CompareOp::Le, a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return compare(CompareOp::Gt, a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return compare(CompareOp::Ge, a, b); }
Tensor operator~(const Tensor& a) { return a.logical_not(); }

}  // namespace ember
