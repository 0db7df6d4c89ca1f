// Reductions over any set of dims (sum, mean, prod, amax/amin, norm, var/std in one Welford
// pass), logsumexp built on them, and the single-dim arg reductions (max/min with indices, argmax).
#include <cmath>
#include <limits>

#include "core/autocast.h"
#include "core/autograd_hooks.h"
#include "core/backend.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember {

namespace {

// Marks the reduced dims; empty `dims` means all of them.
std::vector<bool> reduced_mask(const Tensor& x, const std::vector<int64_t>& dims, const char* op) {
  std::vector<bool> mask(x.dim(), dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, x.dim(), op);
    if (x.dim() == 0) continue;
    EMBER_CHECK(!mask[w], op, ": dim ", w, " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

Shape keepdim_shape(const Tensor& x, const std::vector<bool>& mask) {
  Shape shape = x.sizes();
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) shape[d] = 1;
  return shape;
}

Shape squeezed_shape(const Tensor& x, const std::vector<bool>& mask) {
  Shape shape;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!mask[d]) shape.push_back(x.size(d));
  return shape;
}

DType reduce_dtype(ReduceOp op, DType in) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Prod:
      return is_floating(in) ? in : kInt64;
    case ReduceOp::Amax:
    case ReduceOp::Amin:
      return in;
    default:
      return in;
  }
}

}  // namespace

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, double p) {
  if (autocast::active() && (op == ReduceOp::Sum || op == ReduceOp::Prod || op == ReduceOp::Norm)) {
    const autocast::Op rule =
        op == ReduceOp::Sum ? autocast::Op::sum : (op == ReduceOp::Prod ? autocast::Op::prod : autocast::Op::norm);
    if (autocast::Scope cast{rule, {&x}}) return reduce(op, cast[0], dims, keepdim, p);
  }
  if (needs_grad({&x})) return autograd_hooks()->reduce(op, x, dims, keepdim, p);
  const char* name = reduce_op_name(op);
  std::vector<bool> mask = reduced_mask(x, dims, name);
  if ((op == ReduceOp::Mean || op == ReduceOp::Norm || op == ReduceOp::Var || op == ReduceOp::Std) &&
      !is_floating(x.dtype())) {
    EMBER_FAIL(name, ": could not infer output dtype. Input dtype must be a floating point dtype, got ",
               dtype_name(x.dtype()));
  }
  Shape kept_shape = keepdim_shape(x, mask);
  if (op == ReduceOp::Amax || op == ReduceOp::Amin) {
    EMBER_CHECK(x.numel() > 0 || shape_numel(kept_shape) == 0, name,
                ": expected reduction dims to be specified for an input with zero elements, got shape ",
                shape_str(x.sizes()));
  }
  Tensor out = empty(kept_shape, TensorOptions(reduce_dtype(op, x.dtype())).device(x.device()));
  if (out.numel() > 0) {
    ReduceLoop loop = make_reduce_loop(out, nullptr, x, mask, name);
    kernels_for(x.device(), name).reduce(op, loop, p);
  }
  return keepdim ? out : out.view(squeezed_shape(x, mask));
}

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(ReduceOp::Sum, x, dims, keepdim);
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return reduce(ReduceOp::Mean, x, dims, keepdim);
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  EMBER_CHECK(is_floating(x.dtype()), "var: expected a floating point tensor, got ", dtype_name(x.dtype()));
  return reduce(ReduceOp::Var, x, dims, keepdim, static_cast<double>(correction));
}

Tensor standard_deviation(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  EMBER_CHECK(is_floating(x.dtype()), "std: expected a floating point tensor, got ", dtype_name(x.dtype()));
  return reduce(ReduceOp::Std, x, dims, keepdim, static_cast<double>(correction));
}

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  if (autocast::Scope cast{autocast::Op::logsumexp, {&x}}) return logsumexp(cast[0], dims, keepdim);
  autocast::Hold as_one_op;  // PyTorch's logsumexp is one kernel: its exp and sum are not cast apart
  Tensor input = is_floating(x.dtype()) ? x : x.to(kFloat32);
  Tensor shift;
  {
    NoGradGuard no_grad;  // the shift cancels out of the value, so it needs no gradient
    // amax of nothing raises; any finite shift works there, and the sum of no exps gives -inf.
    shift = input.numel() > 0 ? reduce(ReduceOp::Amax, input, dims, true) : sum(input, dims, true);
    shift = where(compare(CompareOp::Eq, shift.abs(), scalar_tensor(INFINITY, shift.dtype(), Device(kCPU))),
                  zeros_like(shift), shift);
  }
  Tensor result = (input - shift).exp().sum(dims, true).log() + shift;
  if (keepdim) return result;
  std::vector<bool> mask = reduced_mask(x, dims, "logsumexp");
  return result.view(squeezed_shape(x, mask));
}

static std::pair<Tensor, Tensor> arg_reduce(bool is_max, const Tensor& x, int64_t dim, bool keepdim, const char* name) {
  int64_t d = wrap_dim(dim, x.dim(), name);
  std::vector<bool> mask(x.dim(), false);
  if (x.dim() > 0) mask[d] = true;
  EMBER_CHECK(x.dim() == 0 || x.size(d) > 0, name, ": expected reduction dim ", d, " to have non-zero size, got shape ",
              shape_str(x.sizes()));
  Shape kept_shape = keepdim_shape(x, mask);
  Tensor values = empty(kept_shape, x.options());
  Tensor indices = empty(kept_shape, TensorOptions(kInt64).device(x.device()));
  if (values.numel() > 0) {
    ReduceLoop loop = make_reduce_loop(values, &indices, x, mask, name);
    kernels_for(x.device(), name).arg_reduce(is_max, loop);
  }
  if (keepdim) return {values, indices};
  Shape squeezed = squeezed_shape(x, mask);
  return {values.view(squeezed), indices.view(squeezed)};
}

std::pair<Tensor, Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim) {
  if (needs_grad({&x})) return autograd_hooks()->max_min_dim(true, x, dim, keepdim);
  return arg_reduce(true, x, dim, keepdim, "max");
}

std::pair<Tensor, Tensor> min_dim(const Tensor& x, int64_t dim, bool keepdim) {
  if (needs_grad({&x})) return autograd_hooks()->max_min_dim(false, x, dim, keepdim);
  return arg_reduce(false, x, dim, keepdim, "min");
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  Tensor input = x.detach();
  if (!dim) {
    EMBER_CHECK(x.numel() > 0, "argmax: expected a non-empty tensor when no dim is given");
    Tensor index = arg_reduce(true, input.reshape({-1}), 0, false, "argmax").second;
    return keepdim ? index.view(Shape(x.dim(), 1)) : index;
  }
  return arg_reduce(true, input, *dim, keepdim, "argmax").second;
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  Tensor input = x.detach();
  if (!dim) {
    EMBER_CHECK(x.numel() > 0, "argmin: expected a non-empty tensor when no dim is given");
    Tensor index = arg_reduce(false, input.reshape({-1}), 0, false, "argmin").second;
    return keepdim ? index.view(Shape(x.dim(), 1)) : index;
  }
  return arg_reduce(false, input, *dim, keepdim, "argmin").second;
}

}  // namespace ember
