// ember::Error messages: each names the op and what was expected and found (shapes, dtypes,
// devices), so that a user can fix the call from the message alone.
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "core/ember_core.h"

using namespace ember;
using Catch::Contains;

TEST_CASE("errors are ember::Error, a std::runtime_error") {
  CHECK_THROWS_AS(zeros({2}).sum({3}), Error);
  CHECK_THROWS_AS(zeros({2}).sum({3}), std::runtime_error);
}

TEST_CASE("out-of-range dims name the op and the valid range") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(x.sum({2}),
                    Contains("sum: dimension out of range (expected to be in range of [-2, 1], but got 2)"));
  CHECK_THROWS_WITH(x.amax({-3}), Contains("amax: dimension out of range") && Contains("but got -3"));
  CHECK_THROWS_WITH(x.transpose(0, 5), Contains("transpose: dimension out of range"));
  CHECK_THROWS_WITH(x.unsqueeze(4), Contains("unsqueeze") && Contains("[-3, 2]"));
  CHECK_THROWS_WITH(x.max(2), Contains("max: dimension out of range"));
  CHECK_THROWS_WITH(x.argmin(-3), Contains("argmin: dimension out of range"));
  CHECK_THROWS_WITH(x.size(2), Contains("size: dimension out of range"));
  CHECK_THROWS_WITH(cat({x, x}, 2), Contains("cat: dimension out of range"));
  CHECK_THROWS_WITH(stack({x, x}, 4), Contains("stack: dimension out of range") && Contains("[-3, 2]"));
  CHECK_THROWS_WITH(full({}, 1.0).sum({1}),
                    Contains("sum: dimension out of range (expected to be in range of [-1, 0]"));
  CHECK_THROWS_WITH(x.sum({0, -2}), Contains("sum: dim 0 appears multiple times"));
}

TEST_CASE("bad broadcasts name the op and both shapes") {
  Tensor a = zeros({2, 3}), b = zeros({4});
  CHECK_THROWS_WITH(a + b, Contains("add: shapes [2, 3] and [4] cannot be broadcast"));
  CHECK_THROWS_WITH(a * zeros({3, 3}), Contains("mul: shapes [2, 3] and [3, 3]"));
  CHECK_THROWS_WITH(a.lt(b), Contains("lt: shapes [2, 3] and [4]"));
  CHECK_THROWS_WITH(where(zeros({5}, kBool), a, a), Contains("where: shapes [5] and [2, 3]"));
  Tensor dst = zeros({3});
  CHECK_THROWS_WITH(dst.add_(zeros({2, 3})),
                    Contains("add_: output with shape [3] doesn't match the broadcast shape [2, 3]"));
  CHECK_THROWS_WITH(dst.copy_(zeros({2})), Contains("copy_") && Contains("[2]") && Contains("[3]"));
}

TEST_CASE("matmul errors name matmul with the operands' shapes and dtypes") {
  CHECK_THROWS_WITH(matmul(zeros({2, 3}), zeros({4, 5})),
                    Contains("matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)"));
  CHECK_THROWS_WITH(matmul(zeros({7, 2, 3}), zeros({2})), Contains("matmul: shapes [7, 2, 3] and [2]"));
  CHECK_THROWS_WITH(matmul(zeros({3}), zeros({4})), Contains("matmul: shapes [3] and [4]"));
  CHECK_THROWS_WITH(matmul(zeros({2, 2, 3}), zeros({3, 3, 4})),
                    Contains("matmul (batch dims): shapes [2] and [3] cannot be broadcast"));
  CHECK_THROWS_WITH(matmul(zeros({2, 2}), zeros({2, 2}, kFloat64)),
                    Contains("matmul: expected both operands to have the same dtype, but got float32 and float64"));
  CHECK_THROWS_WITH(matmul(zeros({2, 2}, kInt64), zeros({2, 2}, kInt64)),
                    Contains("matmul: expected a floating point dtype, got int64"));
  CHECK_THROWS_WITH(matmul(zeros({}), zeros({2})), Contains("matmul: both arguments need to be at least 1D"));
  CHECK_THROWS_WITH(mm(zeros({2, 3}), zeros({4, 5})),
                    Contains("mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"));
  CHECK_THROWS_WITH(bmm(zeros({2, 2, 3}), zeros({3, 3, 4})),
                    Contains("bmm: batch sizes differ: [2, 2, 3] and [3, 3, 4]"));
}

TEST_CASE("views that the strides cannot express point to reshape") {
  CHECK_THROWS_WITH(
      zeros({2, 3}).t().view({6}),
      Contains("view: view size [6] is not compatible with input tensor's size [3, 2] and stride [1, 3]") &&
          Contains("reshape"));
}

TEST_CASE("reductions of nothing raise where there is no identity") {
  CHECK_THROWS_WITH(zeros({0}).amax(), Contains("amax") && Contains("zero elements") && Contains("[0]"));
  CHECK_THROWS_WITH(zeros({3, 0}).amin({1}), Contains("amin") && Contains("[3, 0]"));
  CHECK_THROWS_WITH(zeros({0, 2}).max(), Contains("amax") && Contains("[0, 2]"));
  CHECK_THROWS_WITH(zeros({2, 0}).max(1),
                    Contains("max: expected reduction dim 1 to have non-zero size") && Contains("[2, 0]"));
  CHECK_THROWS_WITH(zeros({0}).argmax(), Contains("argmax: expected a non-empty tensor"));
  // Reducing over a non-empty dim of an empty tensor is fine, and sums of nothing are zero.
  CHECK(zeros({0, 2}).amax({1}).sizes() == Shape{0});
  CHECK(zeros({3, 0}).sum({1}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(zeros({3, 0}).prod({1}).to_vector<float>() == std::vector<float>{1, 1, 1});
  CHECK(std::isnan(zeros({0}).mean().item<float>()));
}

TEST_CASE("item on many elements names the shape") {
  CHECK_THROWS_WITH(zeros({2, 3}).item(), Contains("item: expected a tensor with one element, got shape [2, 3]"));
}

TEST_CASE("requires_grad is for floating-point tensors only") {
  CHECK_THROWS_WITH(zeros({2}, kInt64).requires_grad_(),
                    Contains("requires_grad_: only floating-point tensors can require gradients, got dtype int64"));
  CHECK_THROWS_WITH(zeros({2}, TensorOptions(kBool).requires_grad(true)), Contains("got dtype bool"));
  Tensor x = zeros({2});
  CHECK(x.requires_grad_().requires_grad());
  CHECK_FALSE(x.requires_grad_(false).requires_grad());
}

TEST_CASE("a CUDA device with no CUDA backend is a clear error") {
  REQUIRE_FALSE(has_backend(kCUDA));
  CHECK_THROWS_WITH(zeros({2}, Device::parse("cuda:0")), Contains("no backend is registered for device cuda:0") &&
                                                             Contains("does not link Ember's CUDA backend"));
  CHECK_THROWS_WITH(zeros({2}).to(Device::cuda(1)), Contains("no backend is registered for device cuda:1"));
  CHECK_THROWS_WITH(Device::parse("gpu:0"), Contains("Device::parse") && Contains("\"gpu:0\""));
  CHECK(Device::parse("cuda").str() == "cuda:0");
  CHECK(Device::parse("cpu") == Device(kCPU));
}

// A backend that leaves a compute-table entry empty: the entry's one error, whichever entry.
TEST_CASE("an entry a backend leaves empty names the entry, the device and the dtype") {
  const KernelTable* cpu = find_kernels(kCPU);
  REQUIRE(cpu != nullptr);
  KernelTable partial = *cpu;
  const KernelTable empty;
  partial.softmax = empty.softmax;
  partial.gemm = empty.gemm;
  partial.conv2d = empty.conv2d;
  register_kernels(kCPU, &partial);
  struct Restore {
    const KernelTable* table;
    ~Restore() { register_kernels(kCPU, table); }
  } restore{cpu};
  Tensor x = randn({2, 3}, kFloat64);
  const KernelTable& table = kernels_for(Device(kCPU), "errors_test");
  CHECK_THROWS_AS(table.softmax(x, 1, false), Error);
  CHECK_THROWS_WITH(table.softmax(x, 1, false),
                    Contains("softmax: not implemented by the cpu backend for cpu and dtype float64"));
  CHECK_THROWS_WITH(x.matmul(x.t()), Contains("gemm: not implemented by the cpu backend for cpu and dtype float64"));
  CHECK_THROWS_WITH(table.conv2d(randn({1, 2, 5, 5}), randn({3, 2, 3, 3}), Tensor(), ConvParams{}),
                    Contains("conv2d: not implemented by the cpu backend for cpu and dtype float32"));
  CHECK(x.sum().item<double>() == x.sum().item<double>());  // the entries it kept still run
  register_kernels(kCPU, cpu);
  CHECK(kernels_for(Device(kCPU), "errors_test").softmax(x, 1, false).sizes() == x.sizes());
}

TEST_CASE("dtype errors name the op and the dtype") {
  CHECK_THROWS_WITH(zeros({2}, kInt64).mean(), Contains("mean") && Contains("floating point") && Contains("int64"));
  CHECK_THROWS_WITH(zeros({2}, kInt32).var(), Contains("var: expected a floating point tensor, got int32"));
  CHECK_THROWS_WITH(zeros({2}, kBool) - zeros({2}, kBool), Contains("sub: not supported for bool tensors"));
  CHECK_THROWS_WITH(zeros({2}, kBool).neg(), Contains("neg: expected a numeric tensor, got dtype bool"));
  CHECK_THROWS_WITH(where(zeros({2}), zeros({2}), zeros({2})),
                    Contains("where: expected condition to be a bool tensor, got float32"));
  CHECK_THROWS_WITH(zeros({2}).data_ptr<double>(), Contains("data_ptr: expected dtype float64, got float32"));
  Tensor i = zeros({2}, kInt64);
  CHECK_THROWS_WITH(i.add_(zeros({2})),
                    Contains("add_: result type float32 can't be cast to the desired output type int64"));
  CHECK_THROWS_WITH(i.div_(ones({2}, kInt64)), Contains("div_: result type float32 can't be cast"));
  Tensor b = zeros({2}, kBool);
  CHECK_THROWS_WITH(b.add_(ones({2}, kInt32)),
                    Contains("add_: result type int32 can't be cast to the desired output type bool"));
  CHECK_THROWS_WITH(arange(3).pow(-1), Contains("pow: integers to negative integer powers are not allowed"));
}

TEST_CASE("undefined tensors and mismatched lists are reported") {
  CHECK_THROWS_WITH(Tensor().sizes(), Contains("the tensor is undefined"));
  CHECK_THROWS_WITH(cat({}), Contains("cat: expected a non-empty list of tensors"));
  CHECK_THROWS_WITH(
      cat({zeros({2, 3}), zeros({2, 4})}),
      Contains("cat: sizes of tensors must match except in dimension 0") && Contains("[2, 3] and [2, 4]"));
  CHECK_THROWS_WITH(cat({zeros({2, 3}), zeros({3})}),
                    Contains("cat: tensors must have the same number of dimensions: got 2 and 1"));
  CHECK_THROWS_WITH(stack({zeros({2}), zeros({3})}), Contains("stack: expects each tensor to be equal size") &&
                                                         Contains("[2] at entry 0 and [3] at entry 1"));
  CHECK_THROWS_WITH(zeros({2}).clamp(std::nullopt, std::nullopt), Contains("clamp: at least one of 'min' or 'max'"));
}
