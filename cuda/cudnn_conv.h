// conv2d's three passes through cuDNN, for cuda/conv.cc on real GPUs (this library exists only
// under --config=cuda). Tensors are contiguous NCHW on one device, of one floating dtype; the
// output tensor is given and overwritten. Callable from any host thread.
//
//   if (!cudnn_conv_forward(x, w, y, p, cudnn_allow_tf32())) ember_path(x, w, y);
#pragma once

#include <cstddef>
#include <string>
#include <vector>

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

// Choosing by measurement (cuda/conv.cc, through core/kernel_select.h, as cudnn.benchmark): every
// algorithm cuDNN could run for a problem, and a way to run a given one. Tensors are named as the
// forward pass's throughout: x input, w weight, y output (the gradients in the backward passes).
enum class CudnnPass { Forward, BackwardData, BackwardFilter };

struct CudnnAlgorithm {
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, by pass
  int math = 0;  // the cudnnMathType_t it runs with
  size_t workspace = 0;
  bool deterministic = true;
  std::string name;  // "cudnn-implicit-precomp-gemm", "cudnn-winograd-nonfused-tensor-op", ...
};

// cuDNN's heuristic ranking for the pass (its first is what cudnn_conv_forward & co. run), less
// what it cannot run here, what would lose the precision asked for, what needs more workspace
// than the limit, and, with `deterministic_only`, what accumulates atomically. Empty when cuDNN
// does not take the problem at all (a dtype, a size beyond its int arguments).
std::vector<CudnnAlgorithm> cudnn_conv_algorithms(CudnnPass pass, const Tensor& x, const Tensor& w, const Tensor& y,
                                                  const ConvParams& p, bool allow_tf32, bool deterministic_only);
// Runs the pass with `algorithm` (one of cudnn_conv_algorithms' for the same problem and switch);
// false, having queued nothing, when cuDNN declines.
bool cudnn_conv_run(CudnnPass pass, const CudnnAlgorithm& algorithm, const Tensor& x, const Tensor& w, const Tensor& y,
                    const ConvParams& p, bool allow_tf32);

// Entries in the algorithm cache, one per (pass, shapes, geometry, dtype, math type, device);
// tests check that a shape is planned once.
size_t cudnn_conv_cached_plans();

}  // namespace ember::cuda
