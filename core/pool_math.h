// Pooling's index arithmetic and its max rule, shared by the CPU and CUDA kernels and the ops'
// shape checks: the output length of an axis, the input span of an output's window along one
// axis (average and adaptive pooling), which outputs' windows cover an input position (for the
// CUDA backward passes, which gather instead of scattering), and which element of a max-pooling
// window wins. EMBER_HOST_DEVICE, like core/reduce_math.h.
#pragma once

#include <cstdint>

#include "core/elementwise_math.h"
#include "core/host_device.h"

namespace ember::formula {

// Output length of one pooled axis, PyTorch's pooling_output_shape: windows of the dilated kernel
// step over the padded input (the division rounds down, also below zero: a window longer than the
// padded input gives a length < 1), and with ceil_mode a partial last window is kept only when it
// starts inside the input or its left padding.
EMBER_HOST_DEVICE inline int64_t pooled_length(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                               int64_t dilation, bool ceil_mode) {
  const int64_t steps = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (steps >= 0 ? steps / stride : -((stride - 1 - steps) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// One axis of an average-pooling window: [start, end) inside the input, and its length counting
// the padding. The padded window stops at in + pad, so with ceil_mode a last window that runs
// past the padding counts only what lies within it (PyTorch's divisor).
struct PoolSpan {
  int64_t start, end, padded_length;
};

EMBER_HOST_DEVICE inline PoolSpan avg_pool_span(int64_t o, int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t start = o * stride - pad;
  const int64_t end = start + kernel < in + pad ? start + kernel : in + pad;
  return {start > 0 ? start : 0, end < in ? end : in, end - start};
}

EMBER_HOST_DEVICE inline int64_t avg_pool_divisor(const PoolSpan& y, const PoolSpan& x, bool count_include_pad) {
  return count_include_pad ? y.padded_length * x.padded_length : (y.end - y.start) * (x.end - x.start);
}

// Adaptive pooling's window of output o along an axis of `in` inputs and `out` outputs:
// [floor(o in / out), ceil((o + 1) in / out)). Windows may overlap, and none is empty.
EMBER_HOST_DEVICE inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
EMBER_HOST_DEVICE inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

// Outputs [first, last] whose windows hold input i; empty when first > last. Both are the
// inverses of the window bounds above (start <= i < end), clipped to the outputs that exist.
struct OutputRange {
  int64_t first, last;
};

EMBER_HOST_DEVICE inline OutputRange avg_pool_outputs_covering(int64_t i, int64_t out, int64_t kernel, int64_t stride,
                                                               int64_t pad) {
  // o stride - pad <= i  and  i < o stride - pad + kernel  (the clip at in + pad never excludes
  // an input position).
  const int64_t reach = i + pad - kernel;
  const int64_t first = reach < 0 ? 0 : reach / stride + 1;
  const int64_t last = (i + pad) / stride;
  return {first, last < out - 1 ? last : out - 1};
}

EMBER_HOST_DEVICE inline OutputRange adaptive_outputs_covering(int64_t i, int64_t in, int64_t out) {
  const int64_t last = ((i + 1) * out + in - 1) / in - 1;
  return {(i * out) / in, last < out - 1 ? last : out - 1};
}

// Max pooling: element k of output o's window along an axis (it may fall in the padding), and
// the inverse, the output whose element k is input i, or -1 when there is none.
EMBER_HOST_DEVICE inline int64_t max_pool_position(int64_t o, int64_t k, int64_t stride, int64_t pad,
                                                   int64_t dilation) {
  return o * stride - pad + k * dilation;
}

EMBER_HOST_DEVICE inline int64_t max_pool_output_through(int64_t i, int64_t k, int64_t out, int64_t stride, int64_t pad,
                                                         int64_t dilation) {
  const int64_t offset = i + pad - k * dilation;
  if (offset < 0 || offset % stride != 0 || offset / stride >= out) return -1;
  return offset / stride;
}

// The first output along an axis whose max-pooling window holds no input element, or -1. With
// pad <= kernel / 2 every window starts before `in` (pooled_length keeps it so), so only windows
// that start in the left padding can miss: when dilation steps from the padding past the input.
EMBER_HOST_DEVICE inline int64_t first_window_in_padding(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                                         int64_t pad, int64_t dilation) {
  for (int64_t o = 0; o < out && o * stride < pad; ++o) {
    const int64_t start = o * stride - pad;
    const int64_t k = (dilation - 1 - start) / dilation;  // the first element at or past position 0
    if (k >= kernel || start + k * dilation >= in) return o;
  }
  return -1;
}

// Max pooling scans its window in row-major order: the first maximum wins, and every NaN replaces
// the best so far, so the window's last NaN wins, and its gradient goes there. That is PyTorch's
// max_pool2d on the CPU and on CUDA (both test `val > maxval || isnan(val)`), unlike its argmax,
// where the first NaN wins (arg_better).
template <typename C>
EMBER_HOST_DEVICE inline bool max_pool_takes(C v, C best, bool have_best) {
  return !have_best || is_nan(v) || v > best;
}

}  // namespace ember::formula
