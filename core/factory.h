// Tensor factories: empty/zeros/ones/full/arange/linspace/eye, tensors from C++ data, random tensors.
//
//   auto w = ember::randn({64, 32}, ember::kFloat32);
//   auto t = ember::tensor({1.f, 2.f, 3.f, 4.f}).view({2, 2});
#pragma once

#include <initializer_list>
#include <vector>

#include "core/tensor.h"

namespace ember {

class Generator;

Tensor empty(const Shape& shape, const TensorOptions& options = {});
Tensor zeros(const Shape& shape, const TensorOptions& options = {});
Tensor ones(const Shape& shape, const TensorOptions& options = {});
Tensor full(const Shape& shape, Scalar value, const TensorOptions& options = {});
// Same shape and options; keeps t's memory layout when t is dense (e.g. channels-last).
Tensor empty_like(const Tensor& t);
// A dense tensor with the given strides' ordering (strides must describe a dense layout).
Tensor empty_strided(const Shape& shape, const Shape& strides, const TensorOptions& options = {});
// True when t's elements exactly fill a block of memory in some dimension order.
bool is_dense(const Tensor& t);
// PyTorch's suggest_memory_format for [N, C, H, W]: true when t's strides run channels fastest,
// then W, H and N (a channels-last tensor, and views of one such as strided slices); ambiguous
// strides (size-1 dims that could sit anywhere) count as NCHW. False for other ranks.
bool channels_last_order(const Tensor& t);
// Strides of a dense channels-last (NHWC in memory) tensor of logical shape [N, C, H, W], and an
// uninitialised tensor with them.
Shape channels_last_strides(const Shape& sizes);
Tensor empty_channels_last(const Shape& sizes, const TensorOptions& options = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
// [start, end) in steps; the dtype is int64 when all of start/end/step are integers, else float32,
// unless options give one.
Tensor arange(Scalar end, const std::optional<TensorOptions>& options = std::nullopt);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, const std::optional<TensorOptions>& options = std::nullopt);
Tensor linspace(double start, double end, int64_t steps, const TensorOptions& options = {});
Tensor eye(int64_t n, int64_t m = -1, const TensorOptions& options = {});

// Copies `values` into a new tensor of `shape` (default: 1-D). The dtype follows T.
template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& shape = {}, Device device = Device(kCPU));
template <typename T>
Tensor tensor(std::initializer_list<T> values, const Shape& shape = {}, Device device = Device(kCPU)) {
  return tensor(std::vector<T>(values), shape, device);
}
// Copies a contiguous host buffer of `shape` elements of `dtype`.
Tensor from_buffer(const void* data, const Shape& shape, DType dtype, Device device = Device(kCPU));
// Wraps host memory without copying; `deleter` (may be empty) runs when the last view dies.
Tensor from_blob(void* data, const Shape& shape, DType dtype, std::function<void(void*)> deleter = {});

// Random tensors from `generator` (default: the global CPU generator; see random.h).
Tensor rand(const Shape& shape, const TensorOptions& options = {}, Generator* generator = nullptr);
Tensor randn(const Shape& shape, const TensorOptions& options = {}, Generator* generator = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& options = TensorOptions(kInt64),
               Generator* generator = nullptr);
// Each element is 1 with probability p[i] (a tensor of probabilities) or p.
Tensor bernoulli(const Tensor& p, Generator* generator = nullptr);
Tensor bernoulli(const Shape& shape, double p, const TensorOptions& options = {}, Generator* generator = nullptr);
Tensor rand_like(const Tensor& t, Generator* generator = nullptr);
Tensor randn_like(const Tensor& t, Generator* generator = nullptr);

}  // namespace ember
