// One pass of one convolution problem, as every CPU candidate (choose.cc) sees it: the sizes
// with the output size worked out once (core/conv_params.h), the params, dtype and bias, and
// Ember's own kernels' view of it where they could take it (float32, ungrouped, non-empty).
#pragma once

#include <cstdint>
#include <optional>

#include "core/conv_params.h"
#include "core/cpu/conv/direct_conv.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace ember::cpu {

enum class ConvPass : int64_t { Forward, BackwardData, BackwardWeights };

// N batch, C/O input/output channels, H/W input size, KH/KW kernel, OH/OW output size.
struct ConvSizes {
  int64_t n, c, h, w, o, kh, kw, oh, ow;
};

struct ConvProblem {
  ConvPass pass;
  ConvSizes g;
  ConvParams p;
  DType dtype;
  bool with_bias;
  std::optional<DirectConvGeometry> own;  // Ember's view of it, when float32, ungrouped, non-empty
};

// `input` [N, C, H, W] and `weight` [O, C / groups, KH, KW], logical (NCHW) shapes.
inline ConvProblem conv_problem(ConvPass pass, const Shape& input, const Shape& weight, const ConvParams& p,
                                DType dtype, bool with_bias) {
  ConvProblem pr{pass,      {input[0], input[1], input[2], input[3], weight[0], weight[2], weight[3], 0, 0},
                 p,         dtype,
                 with_bias, std::nullopt};
  ConvSizes& g = pr.g;
  const auto [oh, ow] = conv_output_hw(g.h, g.w, g.kh, g.kw, p);
  g.oh = oh, g.ow = ow;
  const bool empty = g.n == 0 || g.c == 0 || g.h == 0 || g.w == 0 || g.o == 0 || g.kh == 0 || g.kw == 0;
  if (dtype == kFloat32 && p.groups == 1 && !empty) {
    DirectConvGeometry own{g.n, g.c, g.h, g.w, g.o, g.kh, g.kw};
    own.stride_h = p.stride_h, own.stride_w = p.stride_w, own.pad_h = p.pad_h, own.pad_w = p.pad_w;
    own.dilation_h = p.dilation_h, own.dilation_w = p.dilation_w;
    pr.own = own;
  }
  return pr;
}

}  // namespace ember::cpu
