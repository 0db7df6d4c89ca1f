// Ember's own direct float32 convolution (forward) on channels-last memory, for AVX-512 CPUs.
// It exists for the strided layers of ResNets, where oneDNN's channels-last kernels ran well
// below its blocked-layout kernels (which Ember's strided tensors cannot hold); the conv2d
// kernel-table entry takes it only where tools/bench/conv measured it faster, and oneDNN
// everywhere else (figures: docs/BENCHMARKS.md, notes moved from code comments).
#pragma once

#include <cstdint>

#include "core/conv_params.h"

namespace ember::cpu {

struct DirectConvGeometry {
  int64_t n, c, h, w, o, kh, kw;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t out_h() const { return conv_output_size(h, kh, stride_h, pad_h, dilation_h); }
  int64_t out_w() const { return conv_output_size(w, kw, stride_w, pad_w, dilation_w); }
};

// Whether this CPU runs the kernel at all (AVX-512F).
bool direct_conv_supported();

// Whether the conv2d entry offers this kernel as a candidate (core/cpu/conv/choose.cc): a CPU with
// AVX-512F and a 1x1 kernel without padding, the layers it was written for.
bool direct_conv_applies(const DirectConvGeometry& g);

// Whether the conv2d kernel-table entry should take this kernel rather than oneDNN's without
// trials (EMBER_KERNEL_SELECT=heuristic): where it applies, strided and with full channel groups.
bool direct_conv_preferred(const DirectConvGeometry& g);

// y[n, oh, ow, :] = sum over taps and channels of weight[:, c, i, j] * x[n, ih, iw, c] (+ bias),
// with zero padding. `x` is [N, H, W, C] and `y` [N, OH, OW, O], both dense; `weight` is
// [O, C, KH, KW] (ungrouped); `bias` [O] or null. Any sizes work; requires direct_conv_supported().
void direct_conv_forward(const DirectConvGeometry& g, const float* x, const float* weight, const float* bias, float* y);

}  // namespace ember::cpu
