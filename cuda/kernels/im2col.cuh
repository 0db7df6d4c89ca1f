// The two layout kernels of convolution as GEMM (cuda/conv.cc): im2col unfolds each output
// pixel's receptive field into a column, col2im folds columns back, summing where windows overlap.
#pragma once

#include <cstdint>

#include "core/backend.h"

namespace ember::cuda {

// Geometry of an NCHW convolution over `images` images.
struct ConvGeometry {
  int64_t images = 0, channels = 0, height = 0, width = 0;
  int64_t kernel_h = 0, kernel_w = 0, out_h = 0, out_w = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
};

// col[i][(c, kh, kw)][(oh, ow)] = input[i][c][oh * sh - ph + kh * dh][ow * sw - pw + kw * dw], 0 outside.
// input is contiguous [images, channels, height, width]; col contiguous.
void im2col(const ConvGeometry& g, DType dtype, Device device, const void* input, void* col);
// The adjoint: image[i][c][h][w] = the sum of the col entries im2col would have read it into.
// image is of `dtype`; col of its compute type (float32 for bfloat16 and float16: the GEMM's
// unrounded products, summed before the one rounding to 16 bits).
void col2im(const ConvGeometry& g, DType dtype, Device device, const void* col, void* image);

}  // namespace ember::cuda
