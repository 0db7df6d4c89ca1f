// Ember's own backward-data pass of a strided 1x1 convolution on channels-last float32 memory, for
// AVX2 CPUs: ResNet's projection shortcuts. On AVX2-only CPUs oneDNN's channels-last kernel for it
// ran at 0.71-0.87 of its blocked-layout one; the conv2d backward-data entry takes this kernel only
// where tools/bench/conv measured it faster. (A forward built the same way ran at 0.86-0.91 of
// oneDNN's blocked kernel, below its channels-last one, so the forward stays on oneDNN.)
#pragma once

#include "core/cpu/avx2_tile.h"
#include "core/cpu/direct_conv.h"

namespace ember::cpu {

// Whether the conv2d backward-data entry should take this kernel: 1x1, unpadded, strided, C a
// multiple of 8, on a CPU without AVX-512.
bool pointwise_conv_backward_data_preferred(const DirectConvGeometry& g);

// dx[n, oh * stride_h, ow * stride_w, :] = sum over o of dy[n, oh, ow, o] * weight[o, :], and zero
// at every other input pixel. `dy` is [N, OH, OW, O], `dx` [N, H, W, C], dense. Requires
// avx2::supported(), a 1x1 kernel without padding, and C % 8 == 0.
void pointwise_conv_backward_data(const DirectConvGeometry& g, const float* dy, const float* weight, float* dx);

}  // namespace ember::cpu
