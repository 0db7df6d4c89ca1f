// Gradients of the reductions: the output gradient is broadcast back over the reduced dims and
// weighted per op (1/N for mean, the arg-extremum mask for amax/amin, x/|x| terms for norms,
// the centred input for var and std).
#include <algorithm>
#include <cmath>

#include "autograd/function.h"
#include "autograd/ops/ops.h"
#include "autograd/saved.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::autograd {

namespace {

std::vector<bool> reduced_dims(const Shape& shape, const std::vector<int64_t>& dims) {
  std::vector<bool> mask(shape.size(), dims.empty());
  for (int64_t d : dims) {
    if (shape.empty()) continue;
    mask[d < 0 ? d + static_cast<int64_t>(shape.size()) : d] = true;
  }
  return mask;
}

// The output gradient reshaped to keepdim form, so it broadcasts against the input.
Tensor unsqueeze_reduced(const Tensor& g, const Shape& input_shape, const std::vector<bool>& mask, bool keepdim) {
  if (keepdim) return g;
  Shape shape = input_shape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (mask[d]) shape[d] = 1;
  return g.reshape(shape);
}

const char* reduce_backward_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "SumBackward1";
    case ReduceOp::Mean:
      return "MeanBackward1";
    case ReduceOp::Prod:
      return "ProdBackward1";
    case ReduceOp::Amax:
      return "AmaxBackward0";
    case ReduceOp::Amin:
      return "AminBackward0";
    case ReduceOp::Norm:
      return "NormBackward1";
    case ReduceOp::Var:
      return "VarBackward0";
    case ReduceOp::Std:
      return "StdBackward0";
  }
  return "ReduceBackward";
}

class ReduceBackward final : public Node {
 public:
  ReduceBackward(ReduceOp op, const Tensor& x, const Tensor& y, const std::vector<int64_t>& dims, bool keepdim,
                 double p)
      : op_(op), shape_(x.sizes()), mask_(reduced_dims(x.sizes(), dims)), keepdim_(keepdim), p_(p) {
    count_ = 1;
    for (size_t d = 0; d < shape_.size(); ++d)
      if (mask_[d]) count_ *= shape_[d];
    if (op != ReduceOp::Sum && op != ReduceOp::Mean) {
      x_ = SavedTensor(x);
      y_ = SavedTensor(y);
    }
  }
  std::string name() const override { return reduce_backward_name(op_); }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = unsqueeze_reduced(grads[0], shape_, mask_, keepdim_);
    switch (op_) {
      case ReduceOp::Sum:
        return {g.expand(shape_)};
      case ReduceOp::Mean:
        return {(g / static_cast<double>(count_)).expand(shape_)};
      case ReduceOp::Prod:
        return {g * prod_others()};
      case ReduceOp::Amax:
      case ReduceOp::Amin: {
        // Ties share the gradient evenly (PyTorch's amax/amin rule).
        const Tensor& x = x_.unpack(name());
        Tensor hit = (x == unsqueeze_reduced(y_.unpack(name()), shape_, mask_, keepdim_)).to(g.dtype());
        Tensor ties = hit.sum(dims(), true);
        return {g * hit / ties};
      }
      case ReduceOp::Norm:
        return {g * norm_derivative()};
      case ReduceOp::Var:
      case ReduceOp::Std:
        return {g * moments_derivative()};
    }
    return {Tensor()};
  }

  void release_saved() override {
    x_.reset();
    y_.reset();
  }

 private:
  std::vector<int64_t> dims() const {
    std::vector<int64_t> out;
    for (size_t d = 0; d < mask_.size(); ++d)
      if (mask_[d]) out.push_back(static_cast<int64_t>(d));
    return out;
  }

  // d prod / d x_i = product of the other elements; exact with zeros present.
  Tensor prod_others() const {
    const Tensor& x = x_.unpack(name());
    Tensor y = unsqueeze_reduced(y_.unpack(name()), shape_, mask_, keepdim_);
    Tensor zero = zeros({}, x.options());
    Tensor is_zero = x == zero;
    Tensor zero_count = is_zero.to(kInt64).sum(dims(), true);
    Tensor nonzero_product = ember::where(is_zero, ones({}, x.options()), x).prod(dims(), true);
    Tensor no_zeros = ember::where(is_zero, zero, y / x);
    Tensor one_zero = ember::where(is_zero, nonzero_product.expand(shape_), zero);
    Tensor has_none = zero_count == zeros({}, TensorOptions(kInt64));
    Tensor has_one = zero_count == ones({}, TensorOptions(kInt64));
    return ember::where(has_none, no_zeros, ember::where(has_one, one_zero, zeros_like(x)));
  }

  Tensor norm_derivative() const {
    const Tensor& x = x_.unpack(name());
    Tensor y = unsqueeze_reduced(y_.unpack(name()), shape_, mask_, keepdim_);
    Tensor zero = zeros({}, x.options());
    if (p_ == 0.0) return zeros_like(x);
    if (p_ == 1.0) return x.sign();
    if (std::isinf(p_)) {
      Tensor hit = (x.abs() == y).to(x.dtype());
      return x.sign() * hit / hit.sum(dims(), true);
    }
    // d||x||_p / dx = x |x|^(p-2) / ||x||^(p-1); 0 where the norm is 0.
    Tensor numerator = p_ == 2.0 ? x : x * x.abs().pow(p_ - 2.0);
    Tensor denominator = p_ == 2.0 ? y : y.pow(p_ - 1.0);
    Tensor safe = ember::where(denominator == zero, ones({}, x.options()), denominator);
    return ember::where(denominator == zero, zero, numerator / safe);
  }

  // d var / dx = 2 (x - mean) / (N - correction); d std / dx = (x - mean) / ((N - correction) std),
  // and 0 where std is 0 (a constant slice), PyTorch's convention, instead of 0 / 0.
  Tensor moments_derivative() const {
    const Tensor& x = x_.unpack(name());
    const double divisor = std::max(static_cast<double>(count_) - p_, 0.0);
    Tensor centered = x - x.mean(dims(), true);
    if (op_ == ReduceOp::Var) return centered * (2.0 / divisor);
    Tensor y = unsqueeze_reduced(y_.unpack(name()), shape_, mask_, keepdim_);
    Tensor zero = zeros({}, x.options());
    Tensor is_zero = y == zero;
    Tensor safe = ember::where(is_zero, ones({}, x.options()), y);
    return ember::where(is_zero, zero, centered / (safe * divisor));
  }

  ReduceOp op_;
  Shape shape_;
  std::vector<bool> mask_;
  bool keepdim_;
  double p_;
  int64_t count_ = 1;
  SavedTensor x_, y_;
};

class MaxMinDimBackward final : public Node {
 public:
  MaxMinDimBackward(bool is_max, const Tensor& x, const Tensor& indices, int64_t dim, bool keepdim)
      : is_max_(is_max), shape_(x.sizes()), indices_(indices), dim_(dim), keepdim_(keepdim) {}
  std::string name() const override { return is_max_ ? "MaxBackward0" : "MinBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = grads[0], index = indices_.unpack(name());
    if (shape_.empty()) return {g};
    if (!keepdim_) {
      g = g.unsqueeze(dim_);
      index = index.unsqueeze(dim_);
    }
    // One-hot over `dim` from the saved indices.
    Shape position_shape(shape_.size(), 1);
    position_shape[dim_] = shape_[dim_];
    Tensor positions = arange(shape_[dim_], TensorOptions(kInt64).device(g.device())).view(position_shape);
    Tensor hit = (positions == index).to(g.dtype());
    return {hit * g};
  }
  void release_saved() override { indices_.reset(); }

 private:
  bool is_max_;
  Shape shape_;
  SavedTensor indices_;
  int64_t dim_;
  bool keepdim_;
};

}  // namespace

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, double p) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ember::reduce(op, x, dims, keepdim, p);
  }
  if (!is_floating(y.dtype())) return y;
  std::vector<int64_t> wrapped;
  for (int64_t d : dims) wrapped.push_back(x.dim() == 0 ? 0 : (d < 0 ? d + x.dim() : d));
  auto node = std::make_shared<ReduceBackward>(op, x, y, wrapped, keepdim, p);
  connect(node, {&x});
  return attach(node, y);
}

std::pair<Tensor, Tensor> max_min_dim(bool is_max, const Tensor& x, int64_t dim, bool keepdim) {
  std::pair<Tensor, Tensor> result;
  {
    NoGradGuard no_grad;
    result = is_max ? ember::max_dim(x, dim, keepdim) : ember::min_dim(x, dim, keepdim);
  }
  int64_t wrapped = x.dim() == 0 ? 0 : (dim < 0 ? dim + x.dim() : dim);
  auto node = std::make_shared<MaxMinDimBackward>(is_max, x, result.second, wrapped, keepdim);
  connect(node, {&x});
  result.first = attach(node, result.first);
  return result;
}

}  // namespace ember::autograd
