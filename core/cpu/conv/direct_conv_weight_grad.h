// Ember's own weight gradient of a float32 convolution on channels-last memory, for AVX2 CPUs.
// On AVX2-only CPUs oneDNN's channels-last backward-weight kernels ran below its
// blocked-layout ones (which Ember's strided tensors cannot hold), and reordering into that
// layout per call cost far more than it gained; the conv2d backward-weight kernel-table entry
// takes this kernel only where tools/bench/conv measured it faster, and oneDNN everywhere else.
#pragma once

#include "core/cpu/avx2_tile.h"
#include "core/cpu/conv/direct_conv.h"

namespace ember::cpu {

// Whether the conv2d backward-weight entry offers this kernel as a candidate
// (core/cpu/conv/choose.cc): a CPU with AVX2 and FMA, and C or O a multiple of 8.
bool direct_conv_weight_grad_applies(const DirectConvGeometry& g);

// Whether the conv2d backward-weight entry should take this kernel rather than oneDNN's without
// trials: where it applies, on a CPU without AVX-512.
bool direct_conv_weight_grad_preferred(const DirectConvGeometry& g);

// grad_weight[o, c, i, j] = sum over n, oh, ow of dy[n, oh, ow, o] * x[n, ih, iw, c], where
// ih = oh * stride_h - pad_h + i * dilation_h (iw likewise) and padding contributes nothing.
// `x` is [N, H, W, C] and `dy` [N, OH, OW, O], both dense; `grad_weight` is [O, C, KH, KW]
// (ungrouped) and is overwritten. Requires avx2::supported() and C or O a
// multiple of 8.
void direct_conv_weight_grad(const DirectConvGeometry& g, const float* x, const float* dy, float* grad_weight);

}  // namespace ember::cpu
