// conv2d's three passes through cuDNN, for cuda/conv.cc on real GPUs (this library exists only
// under --config=cuda). Tensors are contiguous NCHW on one device, of one floating dtype; the
// output tensor is given and overwritten. Callable from any host thread.
//
//   if (!cudnn_conv_forward(x, w, y, p, cudnn_allow_tf32())) ember_path(x, w, y);
#pragma once

#include <cstddef>

#include "core/backend.h"

namespace ember::cuda {

// Each returns false, having queued nothing, when cuDNN does not take the convolution (a dtype,
// a size beyond its int arguments, anything it reports as not supported, or no deterministic
// algorithm within the workspace limit): the caller runs Ember's kernels instead. A problem's
// algorithm, or that there is none, is cached. Any other cuDNN failure raises an ember::Error
// naming the pass, the call, cuDNN's status, the shapes, the geometry and the device.
// `allow_tf32` lets float32 use TF32 tensor cores.
bool cudnn_conv_forward(const Tensor& input, const Tensor& weight, const Tensor& output, const ConvParams& p,
                        bool allow_tf32);
bool cudnn_conv_backward_data(const Tensor& grad_output, const Tensor& weight, const Tensor& grad_input,
                              const ConvParams& p, bool allow_tf32);
bool cudnn_conv_backward_filter(const Tensor& grad_output, const Tensor& input, const Tensor& grad_weight,
                                const ConvParams& p, bool allow_tf32);

// Entries in the algorithm cache, one per (pass, shapes, geometry, dtype, math type, device);
// tests check that a shape is planned once.
size_t cudnn_conv_cached_plans();

}  // namespace ember::cuda
