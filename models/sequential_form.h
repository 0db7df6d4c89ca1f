// A zoo model as an nn::Sequential of its layers, for placing stages on devices
// (parallel::ModelParallel, parallel::Pipeline). The Sequential shares the model's layers (no
// copies: training either trains both), its state_dict keys are the model's exactly, in the same
// order, and its forward is the model's, bit for bit.
//
//   auto model = models::make_model("resnet50", 3, 224, 1000);
//   nn::Sequential seq = models::as_sequential(model);  // conv1, bn1, relu, maxpool, layer1.0, ..., fc
//   parallel::ModelParallel placed(seq, {Device::cuda(0), Device::cuda(1)});
//
// ResNets (either stem, BasicBlock or Bottleneck) split into stem layers, one entry per block
// ("layer2.1") and the head; ResNet-9 into its conv units, residual branches and head; MLP into
// its layers; LeNet into convolutions, activations, pools and linear layers. An nn::Sequential is
// returned as it is.
#pragma once

#include <memory>

#include "nn/nn.h"

namespace ember::models {

// Raises an ember::Error naming the model's type for any other model.
nn::Sequential as_sequential(const std::shared_ptr<nn::Module>& model);

}  // namespace ember::models
