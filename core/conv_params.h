// A 2-D convolution's stride, padding, dilation and groups (ConvParams), and the one formula for
// its output size, used by every backend, the reference and the benchmarks. NCHW semantics: input
// [N, C, H, W], weight [O, C / groups, KH, KW]; dilation counts from 1 (a dense kernel).
#pragma once

#include <cstdint>
#include <utility>

namespace ember {

// Convolution geometry, NCHW semantics: input [N, C, H, W], weight [O, C / groups, KH, KW].
struct ConvParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
};

// The output length along one spatial dim: how many positions a kernel of `kernel` taps, spread
// `dilation` apart, takes in `in` elements padded by `pad` on each side, stepping by `stride`.
inline int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  return (in + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
}

// (out_h, out_w) for an input of height `h` and width `w` and a kh x kw kernel under `p`.
inline std::pair<int64_t, int64_t> conv_output_hw(int64_t h, int64_t w, int64_t kh, int64_t kw, const ConvParams& p) {
  return {conv_output_size(h, kh, p.stride_h, p.pad_h, p.dilation_h),
          conv_output_size(w, kw, p.stride_w, p.pad_w, p.dilation_w)};
}

}  // namespace ember
