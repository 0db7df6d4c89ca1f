// Ember's Winograd F(2x2, 3x3) convolution for bf16 problems (autocast's), on CPUs with bf16 dot
// products (AVX512_BF16).
//
// oneDNN 2.6 has Winograd for float32 only, so a bf16 3x3 layer had two ways to run: oneDNN's
// direct bf16 kernels, at close to the bf16 units' peak, or the problem cast to float32 and run by
// float32 Winograd (as-float32), which wins on 256- and 512-channel layers because F(4x4, 3x3)
// does a quarter of the multiplies. F(2x2, 3x3) does 16 products per 4 output pixels instead of
// 36, at bf16's rate: the transformed tiles and filters are rounded to bf16 (the transforms
// themselves run in float32), their 16 GEMMs use vdpbf16ps with float32 sums, and the output
// transform sums in float32 before the one rounding to bf16. F(2x2) rather than F(4x4): its
// transforms only add and halve, so rounding their results to bf16 costs about what rounding the
// operands did; F(4x4)'s constants would amplify it.
#pragma once

#include "core/cpu/conv/conv_problem.h"
#include "core/tensor.h"

namespace ember::cpu {

// Whether the kernels take the problem: a bf16 forward or backward-data pass, 3x3, stride 1,
// undilated, ungrouped, padding at most 2, on a CPU with native bf16 (has_native_bf16()).
bool winograd_bf16_applies(const ConvProblem& pr);

// The passes on logical NCHW tensors (any layout); results are channels-last. Require
// winograd_bf16_applies for the pass.
Tensor winograd_bf16_forward(const ConvProblem& pr, const Tensor& input, const Tensor& weight, const Tensor& bias);
Tensor winograd_bf16_backward_data(const ConvProblem& pr, const Tensor& grad_output, const Tensor& weight,
                                   const Shape& input_shape);

}  // namespace ember::cpu
