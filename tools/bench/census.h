// A network's convolutions and FLOPs per image, for the benchmarks' rates and MFU: one forward of a
// single image on the CPU, through a copy of the CPU kernel table that records each conv2d call.
//
//   Census c = take_census(*models::make_model("resnet50", 3, 224, 1000), {3, 224, 224});
//   // c.convs: 23 distinct shapes with their counts; c.forward_flops_per_image: 8.18e9
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/conv_params.h"
#include "nn/module.h"

namespace ember::bench {

// One distinct convolution: square kernel, square stride and padding, no groups or dilation.
struct ConvShape {
  int64_t c, o, k, stride, pad, h, w;
  bool input_grad;  // false for the stem: its input needs no gradient
  int count;        // how often the network runs it

  int64_t out_h() const { return conv_output_size(h, k, stride, pad, 1); }
  int64_t out_w() const { return conv_output_size(w, k, stride, pad, 1); }
  double forward_flops(int64_t batch) const { return 2.0 * batch * o * out_h() * out_w() * c * k * k; }
  // Forward, backward-weight and (unless the stem) backward-data, each the forward's cost.
  double step_flops(int64_t batch) const { return forward_flops(batch) * (input_grad ? 3 : 2); }
  // "C:O:K:S:P:H:W:G": what tools/bench/pytorch_gpu.py takes in --convs and names in its records.
  std::string spec() const;
  std::string label() const;  // "128->128 3x3 s2 56x56"
};

struct Census {
  std::vector<ConvShape> convs;  // in the order the forward first runs them
  // Convolutions 2*N*O*OH*OW*(C/groups)*KH*KW plus linear layers 2*in*out.
  double forward_flops_per_image = 0;
};

// `image` is one example's shape, [C, H, W]. The forward runs in evaluation mode (batch norm
// cannot train on one value per channel); the model's mode is restored afterwards.
Census take_census(nn::Module& model, const Shape& image);

}  // namespace ember::bench
