// Ember's own forward pass of strided convolutions on channels-last float32 memory, for AVX2 CPUs:
// ResNet's downsampling 3x3 layers, where oneDNN's channels-last kernel ran below its
// blocked-layout one on an AVX2-only CPU. The conv2d entry takes it only where tools/bench/conv
// measured it faster (CPUs with AVX-512 have direct_conv.h and oneDNN's AVX-512 kernels instead).
#pragma once

#include "core/cpu/conv/direct_conv.h"

namespace ember::cpu {

// Whether the conv2d entry offers this kernel as a candidate (core/cpu/conv/choose.cc): a CPU with
// AVX2 and FMA, 3x3, undilated, O a multiple of 8. It takes any stride: trials sort out per shape
// where it beats oneDNN (with the ISA capped to AVX2 it also won on narrow stride-1 layers).
bool strided_conv_forward_applies(const DirectConvGeometry& g);

// Whether the conv2d entry should take this kernel without trials: 3x3, strided, undilated, O a multiple of 8,
// output rows of at least 8 pixels, on a CPU without AVX-512.
bool strided_conv_forward_preferred(const DirectConvGeometry& g);

// y[n, oh, ow, :] = bias + sum over taps (i, j) and channels c of weight[:, c, i, j] *
// x[n, oh * stride_h - pad_h + i, ow * stride_w - pad_w + j, c], with zero padding. `x` is
// [N, H, W, C] and `y` [N, OH, OW, O], both dense; `weight` is [O, C, KH, KW]; `bias` [O] or null.
// Any kernel, stride and padding work; requires avx2::supported(), dilation 1 and O % 8 == 0.
void strided_conv_forward(const DirectConvGeometry& g, const float* x, const float* weight, const float* bias,
                          float* y);

}  // namespace ember::cpu
