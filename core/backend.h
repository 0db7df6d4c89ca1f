// The kernel table: the narrow set of primitives a backend implements for one device type.
// core calls only these; the CPU backend (core/cpu) and the CUDA backend (cuda/) register
// themselves at start-up, so core never includes a backend header.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "core/conv_params.h"
#include "core/device.h"
#include "core/loop.h"
#include "core/op_kinds.h"
#include "core/random_math.h"
#include "core/scalar.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace ember {

// Row-major C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] for b in [0, batch), on `device`.
struct GemmArgs {
  Device device;
  DType dtype = kFloat32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1.0, beta = 0.0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // in elements
};

// Pooling geometry; out_h/out_w are resolved by the op (ceil_mode applied) before the kernel runs.
struct PoolParams {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool count_include_pad = true;  // avg pooling: divide by the full window
  int64_t out_h = 0, out_w = 0;
};

// Fused SGD update of one parameter: PyTorch's single-tensor SGD step, every operation rounded in
// the parameter's dtype exactly as the op-by-op version rounds it.
//   d = (maximize ? -grad : grad) + weight_decay * param          (the second term only when wd != 0)
//   momentum != 0:  buf = first_step ? d : momentum * buf + (1 - dampening) * d
//                   d = nesterov ? d + momentum * buf : buf
//   param += -lr * d
struct SgdUpdateArgs {
  double lr = 0.0, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false, maximize = false;
  bool first_step = false;  // the momentum buffer holds no history yet and is set to d
};

// Fused Adam / AdamW update of one parameter (PyTorch's single-tensor step). `step` counts this
// update too (1 on the first), and sets the bias corrections 1 - beta^step.
//   g = maximize ? -grad : grad;  Adam: g += weight_decay * param;  AdamW: param *= 1 - lr * weight_decay
//   exp_avg = beta1 * exp_avg + (1 - beta1) * g;  exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
//   amsgrad: max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq), used in place of exp_avg_sq below
//   param += -lr / (1 - beta1^step) * exp_avg / (sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps)
struct AdamUpdateArgs {
  double lr = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;
  bool decoupled_weight_decay = false;  // AdamW
  bool amsgrad = false, maximize = false;
};

// Every entry runs on the device its arguments name (a loop's device, a tensor's), queued on that
// device's current stream: a kernel may still be running when the call returns. Host code sees
// its results through copies to the CPU, which wait for the stream, or after synchronize.
struct KernelTable {
  const char* name = "?";
  // Devices of this type; the registry rejects an index beyond it.
  int (*device_count)() = nullptr;
  // Whether this process has started the device runtime (a CUDA context): a forked copy of the
  // process could not use it, so multiprocessing refuses to fork then. Null: never.
  bool (*runtime_started)() = nullptr;
  // Memory of device `device_index`. A CUDA allocation belongs to the stream current when it was
  // made: freeing it makes it reusable for that stream's later work at once.
  Allocator* (*allocator)(int device_index) = nullptr;
  // Page-locked host memory that this backend's copies can read and write asynchronously
  // (Tensor::pin_memory); null when the backend has none.
  Allocator* (*pinned_allocator)() = nullptr;
  // Waits until everything queued on the device has finished.
  void (*synchronize)(Device device) = nullptr;
  // Elementwise over a StridedLoop; operand 0 is the output.
  void (*copy)(const StridedLoop& loop) = nullptr;  // casts between operand dtypes
  void (*fill)(const StridedLoop& loop, Scalar value) = nullptr;
  void (*unary)(UnaryOp op, const StridedLoop& loop, double a, double b) = nullptr;
  // Operands: grad_in (out), grad_out, x, y: the gradient of a unary op in one pass.
  void (*unary_backward)(UnaryOp op, const StridedLoop& loop, double a, double b) = nullptr;
  void (*binary)(BinaryOp op, const StridedLoop& loop) = nullptr;
  void (*compare)(CompareOp op, const StridedLoop& loop) = nullptr;  // out bool; inputs share a dtype
  void (*where)(const StridedLoop& loop) = nullptr;                   // out, condition (bool), a, b
  void (*reduce)(ReduceOp op, const ReduceLoop& loop, double p) = nullptr;
  void (*arg_reduce)(bool is_max, const ReduceLoop& loop) = nullptr;  // out values, out2 int64 indices
  void (*gemm)(const GemmArgs& args) = nullptr;
  // Fills a contiguous buffer of `numel` elements: Uniform [a, b), Normal(mean a, std b),
  // Bernoulli(p = a), RandInt [a, b).
  void (*random)(RandomKind kind, Device device, void* data, DType dtype, int64_t numel, PhiloxState state,
                 double a, double b) = nullptr;
  // ---- neural-net primitives. Tensors may have any strides (NCHW or channels-last); a kernel
  // returns its outputs in the layout it prefers. ----
  Tensor (*conv2d)(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p) = nullptr;
  Tensor (*conv2d_backward_input)(const Tensor& grad_output, const Tensor& weight, const Shape& input_shape,
                                  const ConvParams& p) = nullptr;
  // (grad_weight, grad_bias); grad_bias only when want_bias.
  std::pair<Tensor, Tensor> (*conv2d_backward_weight)(const Tensor& grad_output, const Tensor& input,
                                                      const Shape& weight_shape, bool want_bias,
                                                      const ConvParams& p) = nullptr;
  // (output, int64 indices into each H*W plane, as PyTorch returns them).
  std::pair<Tensor, Tensor> (*max_pool2d)(const Tensor& input, const PoolParams& p) = nullptr;
  Tensor (*max_pool2d_backward)(const Tensor& grad_output, const Tensor& indices, const Shape& input_shape,
                                const PoolParams& p) = nullptr;
  Tensor (*avg_pool2d)(const Tensor& input, const PoolParams& p) = nullptr;
  Tensor (*avg_pool2d_backward)(const Tensor& grad_output, const Shape& input_shape, const PoolParams& p) = nullptr;
  Tensor (*adaptive_avg_pool2d)(const Tensor& input, int64_t out_h, int64_t out_w) = nullptr;
  Tensor (*adaptive_avg_pool2d_backward)(const Tensor& grad_output, const Shape& input_shape) = nullptr;
  // Batch norm over dim 1 of [N, C, *]. stats: per-channel (mean, biased variance) in float32
  // or float64 (the input's floating type, at least float32).
  std::pair<Tensor, Tensor> (*batch_norm_stats)(const Tensor& input) = nullptr;
  // y = (x - mean) * invstd * weight + bias; weight/bias may be undefined (1 and 0). With `relu`,
  // y = max(y, 0) in the same pass (batch_norm_relu, ResNet's BN -> ReLU).
  Tensor (*batch_norm_apply)(const Tensor& input, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                             const Tensor& bias, bool relu) = nullptr;
  // Per-channel (sum of dy, sum of dy * (x - mean)): the reductions of the backward, kept apart
  // so SyncBatchNorm can all-reduce them between ranks. When `relu_output` is defined (the fused
  // forward's output), dy counts only where it is > 0, as ReLU's backward would have masked it.
  std::pair<Tensor, Tensor> (*batch_norm_backward_reduce)(const Tensor& grad_output, const Tensor& input,
                                                          const Tensor& mean, const Tensor& relu_output) = nullptr;
  // dx = (dy - sum_dy / count - (x - mean) * invstd^2 * sum_dy_xmu / count) * invstd * weight,
  // dy masked by relu_output > 0 when defined.
  Tensor (*batch_norm_backward_input)(const Tensor& grad_output, const Tensor& input, const Tensor& mean,
                                      const Tensor& invstd, const Tensor& weight, const Tensor& sum_dy,
                                      const Tensor& sum_dy_xmu, int64_t count, const Tensor& relu_output) = nullptr;
  // Softmax (or log-softmax when log) along dim, and its backward from the forward output.
  Tensor (*softmax)(const Tensor& input, int64_t dim, bool log) = nullptr;
  Tensor (*softmax_backward)(const Tensor& grad_output, const Tensor& output, int64_t dim, bool log) = nullptr;
  // out[i][j] = input[i][index[i][j]] along dim (PyTorch's gather), and its adjoint: out[...index...] += src.
  void (*gather)(const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index) = nullptr;
  void (*scatter_add)(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) = nullptr;

  // ---- fused optimizer updates: param, grad and the state tensors are contiguous, of one dtype
  // (float32 or float64) and of param's numel; callers check (core/fused_update.h). One pass
  // reads and writes them all. ----
  void (*sgd_update)(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                     const SgdUpdateArgs& args) = nullptr;  // momentum_buffer undefined when momentum == 0
  void (*adam_update)(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                      const Tensor& max_exp_avg_sq, const AdamUpdateArgs& args) = nullptr;  // max: amsgrad only

  // Copies nbytes of contiguous memory to or from a device of this backend's type: host to
  // device, device to host, or between two devices of this type (directly, peer to peer).
  // Between devices it never blocks the host; to or from the host it returns once the host memory
  // may be reused or read, unless `non_blocking` and the host memory is pinned (then the copy is
  // ordered on the device's current stream only).
  void (*memcpy_device)(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
                        bool non_blocking) = nullptr;

  // Streams, for autograd: backward kernels run on the caller's current streams, so a node
  // captures the stream its forward ran on, and before its backward runs, the current stream of
  // that device waits for the work queued on the captured one (nothing when they are the same;
  // the result says whether they differ). Null on backends whose work runs in order on the host.
  std::shared_ptr<void> (*capture_stream)(Device device) = nullptr;
  bool (*wait_for_captured)(const std::shared_ptr<void>& captured) = nullptr;
  // Makes a captured stream the calling thread's current stream (and its device the current
  // device): DataParallel's replica threads queue on the caller's streams, so the caller's later
  // work, and the backward, are ordered after theirs with no event.
  void (*make_current)(const std::shared_ptr<void>& captured) = nullptr;
  // A new stream on `device`, as a token the two calls above take: a pipeline stage queues its
  // work on a stream of its own, so that two stages on one device still overlap.
  std::shared_ptr<void> (*new_stream)(Device device) = nullptr;
  // The tensor's memory is used on the captured stream too: it is not reused, once freed, before
  // that stream's work queued by then has passed (a pipeline stage reading its neighbour's output).
  void (*record_stream)(const Tensor& tensor, const std::shared_ptr<void>& captured) = nullptr;
};

void register_backend(DeviceType type, const KernelTable* table);
// The table for `device`, or an Error naming `op` when no backend is registered for it or the
// device does not exist.
const KernelTable& kernels_for(Device device, const char* op);
bool has_backend(DeviceType type);
// The registered table for `type`, or null.
const KernelTable* find_backend(DeviceType type);

}  // namespace ember
