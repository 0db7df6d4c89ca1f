// The differentiable forms of core's primitive families, installed as AutogradHooks by
// autograd/hooks.cc. Each computes the forward with core (grad mode off) and records a node.
#pragma once

#include <utility>
#include <vector>

#include "core/op_kinds.h"
#include "core/tensor.h"
#include "core/view_spec.h"

namespace ember::autograd {

Tensor unary(UnaryOp op, const Tensor& x, double a, double b);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, double p);
std::pair<Tensor, Tensor> max_min_dim(bool is_max, const Tensor& x, int64_t dim, bool keepdim);
Tensor view(const Tensor& x, const ViewSpec& spec);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor convert(const Tensor& x, DType dtype, Device device);
Tensor clone(const Tensor& x, bool contiguous);
void rebase_inplace(const Tensor& self, const Tensor& result, const char* op);

}  // namespace ember::autograd
