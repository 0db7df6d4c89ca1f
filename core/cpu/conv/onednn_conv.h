// oneDNN's convolution primitives as candidates of the CPU conv2d entries (choose.cc): its direct
// kernels on Ember's NHWC memory in place (ConvVariant::Nhwc), in the blocked layout it prefers
// with the activations reordered into scratch and back (Blocked), and its Winograd F(4x4, 3x3)
// kernels for 3x3 stride-1 layers (Winograd; AVX-512 CPUs). Primitives are made once per problem
// and cached. Activations are NHWC; outputs are returned channels-last; weights are Ember's plain
// [O, C/G, KH, KW], reordered per call where a primitive wants another layout (they are small).
#pragma once

#include <memory>
#include <utility>

#include "core/cpu/conv/conv_problem.h"
#include "core/tensor.h"

namespace ember::cpu::onednn {

// NhwcFloat32Weights: the backward-weights pass of a bf16 problem on NHWC activations, writing
// float32 gradients (for the split-batch weight gradient below).
enum class ConvVariant : int64_t { Nhwc, Blocked, Winograd, NhwcFloat32Weights };

struct ConvPrimitive;  // a ready-to-run primitive and the layouts its arguments must have

// The primitive for the problem in `variant` (cached, thread-safe); nullptr where oneDNN refuses
// the problem or offers only its slow reference kernel (Ember's im2col path is faster than that),
// and for a Blocked variant that chose NHWC after all (the Nhwc candidate again). The problem's
// dtype must be one oneDNN takes (onednn::data_type).
std::shared_ptr<const ConvPrimitive> conv_primitive(const ConvProblem& pr, ConvVariant variant);

// The problems oneDNN's Winograd kernels take: float32 3x3, stride 1, no dilation or groups.
bool winograd_conv_applies(const ConvProblem& pr);
// The heuristic's rule: Winograd pays where the direct kernels are slowest relative to it, both
// channel counts >= 32 (at 16 channels the direct kernel wins).
bool winograd_conv_preferred(const ConvProblem& pr);

// The passes through `prim`, made for `pr`. `bias`, when defined, is contiguous in the input's
// dtype.
Tensor conv_forward(const ConvPrimitive& prim, const ConvProblem& pr, const Tensor& input, const Tensor& weight,
                    const Tensor& bias);
Tensor conv_backward_data(const ConvPrimitive& prim, const Tensor& grad_output, const Tensor& weight,
                          const Shape& input_shape);
// The gradients come in the dtype of the primitive's weights.
std::pair<Tensor, Tensor> conv_backward_weight(const ConvPrimitive& prim, const ConvProblem& pr,
                                               const Tensor& grad_output, const Tensor& input,
                                               const Shape& weight_shape, bool want_bias);

// The bf16 weight gradient split over the batch: each thread runs oneDNN's bf16 backward-weights
// kernel single-threaded on its share of the images, into float32 partial gradients, which are then
// summed and rounded to bf16 once. oneDNN's multi-threaded bf16 kernel splits the batch the same
// way but meets its threads at spin barriers inside the kernel, which cost whole time slices when
// the cores are shared (another process, a data loader's workers): on a busy 2-core machine a pass
// took 10-100x its quiet time. Where (and, for the heuristic, always there): bf16 weight gradients
// with native bf16, more than one thread and at least as many images as threads.
bool split_batch_weight_grad_applies(const ConvProblem& pr);
std::pair<Tensor, Tensor> conv_backward_weight_split_batch(const ConvProblem& pr, const Tensor& grad_output,
                                                           const Tensor& input, const Shape& weight_shape,
                                                           bool want_bias);

}  // namespace ember::cpu::onednn
