// Ember's own backward-data pass of strided convolutions on channels-last float32 memory, for AVX2
// CPUs: ResNet's downsampling 3x3 layers and large 1x1 projection shortcuts. On AVX2-only CPUs
// oneDNN's channels-last kernels for these ran below its blocked-layout ones; the
// conv2d backward-data entry takes this kernel only where tools/bench/conv measured it faster.
#pragma once

#include "core/cpu/conv/direct_conv.h"

namespace ember::cpu {

// Whether the conv2d backward-data entry offers this kernel as a candidate (core/cpu/conv/choose.cc):
// a CPU with AVX2 and FMA, undilated, a kernel of at most 3x3, C a multiple of 8, any stride.
bool strided_conv_backward_data_applies(const DirectConvGeometry& g);

// Whether the conv2d backward-data entry should take this kernel without trials: strided, undilated, a kernel of
// at most 3x3 (1x1 only where its zeros stream), C a multiple of 8, dy's rows at least 8 pixels,
// on a CPU without AVX-512.
bool strided_conv_backward_data_preferred(const DirectConvGeometry& g);

// dx[n, ih, iw, c] = sum over the taps (i, j) and output pixels (oh, ow) with
// oh * stride_h - pad_h + i == ih and ow * stride_w - pad_w + j == iw of
// dy[n, oh, ow, o] * weight[o, c, i, j] (zero where no tap reaches). `dy` is [N, OH, OW, O] and
// `dx` [N, H, W, C], both dense; `weight` is [O, C, KH, KW]. Any stride and padding work; requires
// avx2::supported(), dilation 1 and C % 8 == 0. `streaming` writes the zeros with streaming stores,
// around the cache (tests force it; by default, streaming_zeros_preferred(g) decides).
void strided_conv_backward_data(const DirectConvGeometry& g, const float* dy, const float* weight, float* dx);
void strided_conv_backward_data(const DirectConvGeometry& g, const float* dy, const float* weight, float* dx,
                                bool streaming);

// Whether dx's zeros should bypass the cache: dx at least as large as the last-level cache (which
// it could not stay in for its consumer anyway) and made of whole cache lines per pixel.
bool streaming_zeros_preferred(const DirectConvGeometry& g);

}  // namespace ember::cpu
