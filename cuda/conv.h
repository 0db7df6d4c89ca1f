// conv2d on CUDA devices: forward, backward-data and backward-weight, with stride, padding,
// dilation and groups. On real GPUs cuDNN runs them (cuda/cudnn_conv.h); on emulated devices, when
// asked, and for what cuDNN does not take, Ember's im2col + GEMM (cuda/kernels/im2col.cuh,
// cuda/blas.h). Inputs of any layout are read as contiguous NCHW; outputs are NCHW.
#pragma once

#include "cuda/kernels/entries.h"

namespace ember::cuda {

// Which kernels compute conv2d on a real GPU: cuDNN (Auto) or Ember's im2col + GEMM (Ember), for
// comparison and as a fallback. Emulated devices always run Ember's.
enum class ConvKernel { Auto, Ember };
void set_conv_kernel(ConvKernel kernel);
ConvKernel conv_kernel_choice();

// Which algorithms the choice by measurement may take (core/kernel_select.h: in benchmark mode
// each pass's first call of a shape times every candidate, as cudnn.benchmark): deterministic
// ones only (the default: a resumed run continues bit for bit), or cuDNN's atomic-accumulating
// backward algorithms too (torch.use_deterministic_algorithms(False)).
void set_conv_deterministic(bool deterministic);
bool conv_deterministic();

// torch.backends.cudnn.allow_tf32: on by default, unlike matmul's switch (cuda/blas.h), as in
// PyTorch. Lets cuDNN run float32 convolutions on TF32 tensor cores (10-bit mantissa inputs).
void set_cudnn_allow_tf32(bool allow);
bool cudnn_allow_tf32();

// The convolution entries themselves, conv2d_kernel and its two backward kernels, are declared
// with the others in cuda/kernels/entries.h.

}  // namespace ember::cuda
