// The op table: every core op as OpCases, grouped by family. A backend's test runs these lists
// with its own Device through check_op_case (see op_harness.h).
#pragma once

#include <vector>

#include "tests/core/op_harness.h"

namespace ember::test {

std::vector<OpCase> unary_cases();          // every UnaryOp, clamp and pow with a scalar exponent
std::vector<OpCase> binary_cases();         // arithmetic (with alpha and scalars), comparisons, where
std::vector<OpCase> reduction_cases();      // reductions over dim subsets, max/min with indices, arg*
std::vector<OpCase> structural_cases();     // matmul, mm, bmm, cat/stack/split/chunk
std::vector<OpCase> copy_cases();           // to(dtype), clone, contiguous, in-place ops and copy_
std::vector<OpCase> pool_cases();           // max (with indices), average and adaptive average pooling
std::vector<OpCase> index_cases();          // gather, scatter_add, embedding
std::vector<OpCase> normalization_cases();  // batch norm (train and eval, fused ReLU), softmax, log-softmax
std::vector<OpCase> conv_cases();           // conv2d: stride, padding, dilation, groups, channels-last
std::vector<OpCase> functional_cases();     // linear, layer_norm, losses, dropout, set_grad
std::vector<OpCase> all_op_cases();         // every family above

// The dtype a floating-only op gives: integers compute in float32, like PyTorch's exp or sqrt.
inline DType floating_result(DType d) { return is_floating(d) ? d : kFloat32; }

}  // namespace ember::test
