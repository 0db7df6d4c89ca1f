// Ember's Winograd F(2x2, 3x3) convolution on channels-last float32 memory, for AVX2 CPUs.
//
// oneDNN 2.6 has Winograd kernels for AVX-512 only, so on AVX2 CPUs every 3x3 stride-1 layer ran
// as a direct convolution, already close to OpenBLAS's sgemm rate: only fewer multiplies could
// make it faster. F(2x2, 3x3) turns each 4x4 input tile into 16 products instead of 36, as 16
// independent GEMMs (one per point of the transformed tile) between the transformed inputs and
// weights, which run on the AVX2 register tile (avx2_tile.h). The conv2d entry offers it as a
// candidate where it applies and keeps it only where trials measure it faster (kernel_select.h).
#pragma once

#include "core/cpu/conv/direct_conv.h"

namespace ember::cpu {

// Whether these kernels take the geometry: 3x3, stride 1, dilation 1, padding at most 2, C and O
// multiples of 8, and a CPU with AVX2 and FMA (avx2::supported()).
bool winograd_avx2_applies(const DirectConvGeometry& g);

// As strided_conv_forward: `x` [N, H, W, C] and `y` [N, OH, OW, O] dense, `weight` [O, C, 3, 3],
// `bias` [O] or null. Requires winograd_avx2_applies(g).
void winograd_avx2_forward(const DirectConvGeometry& g, const float* x, const float* weight, const float* bias,
                           float* y);

// The gradient of forward's x: `dy` [N, OH, OW, O] and `dx` [N, H, W, C] dense (overwritten). It
// is the forward convolution of dy with each filter turned by 180 degrees, O and C swapped, and
// padding 2 - pad. Requires winograd_avx2_applies(g).
void winograd_avx2_backward_data(const DirectConvGeometry& g, const float* dy, const float* weight, float* dx);

}  // namespace ember::cpu
