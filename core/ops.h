// The tensor operations of core as free functions (Tensor's methods call these).
// All elementwise ops broadcast and accept any strides; see tensor.h for the method forms.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "core/op_kinds.h"
#include "core/tensor.h"

namespace ember {

// ---- elementwise ----
Tensor unary(UnaryOp op, const Tensor& x, double a = 0.0, double b = 0.0);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor compare(CompareOp op, const Tensor& a, const Tensor& b);  // bool result, no gradient
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor scalar_tensor(Scalar value, DType dtype, Device device = Device(kCPU));  // 0-dim
// The dtype `op` computes in, PyTorch's rules: dimensioned tensors beat 0-dim ones and
// scalars within a category (bool < integer < floating).
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, Scalar b);

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, Scalar exponent);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
// relu(a + b) in one pass (and one backward node): a residual block's output.
Tensor add_relu(const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);

// ---- reductions ----
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, double p = 2.0);
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// correction = 1 gives the unbiased estimate.
Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim);
// Tensor::std; not ember::std, which would read as the standard library's namespace.
Tensor standard_deviation(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim);
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// (values, int64 indices) along one dim; ties give the first index.
std::pair<Tensor, Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min_dim(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// ---- joining ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

// ---- linear algebra ----
// torch.matmul semantics: 1-D dot, 2-D mm, N-D batched with broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);   // [M, K] x [K, N]
Tensor bmm(const Tensor& a, const Tensor& b);  // [B, M, K] x [B, K, N]

// ---- primitives the autograd formulas use ----
// grad * d(op)/dx for a unary op, from its input x and output y (same shape as grad). The one
// of x and y that formula::unary_grad_operand(op) does not name may be undefined.
Tensor unary_backward(UnaryOp op, const Tensor& grad, const Tensor& x, const Tensor& y, double a, double b);

// ---- copies ----
Tensor to_dtype(const Tensor& x, DType dtype);
Tensor to_device(const Tensor& x, Device device, bool non_blocking = false);
// A copy; keeps x's dense layout (e.g. channels-last) unless `contiguous`.
Tensor clone(const Tensor& x, bool contiguous = false);
void copy_into(const Tensor& dst, const Tensor& src,
               bool non_blocking = false);  // no version bump, no autograd: for kernels

}  // namespace ember
