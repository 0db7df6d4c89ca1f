// as_sequential: each zoo model's forward written out as entries named after the model's own
// children, with parameterless steps for what the forward computes inline.
#include "models/sequential_form.h"

#include <string>

#include "models/resnet.h"
#include "models/sequential_steps.h"
#include "models/small.h"

namespace ember::models {

namespace {

// ResNetImpl::forward: conv1, bn1 + ReLU (fused by the Sequential), the ImageNet stem's max-pool,
// every block of every stage, global average pool, flatten, fc.
nn::Sequential resnet_form(const ResNetImpl& net) {
  nn::Sequential seq;
  seq->push_back("conv1", net.conv1);
  seq->push_back("bn1", net.bn1);
  seq->push_back("relu", nn::ReLU());
  if (net.config.stem == Stem::ImageNet)
    seq->push_back("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(Size2(2)).padding(1)));
  for (size_t stage = 0; stage < net.layers.size(); ++stage) {
    const nn::Sequential& layer = net.layers[stage];
    const std::string prefix = "layer" + std::to_string(stage + 1) + ".";
    for (size_t block = 0; block < layer->size(); ++block) seq->push_back(prefix + layer->name(block), (*layer)[block]);
  }
  seq->push_back("avgpool", nn::AdaptiveAvgPool2d(1));
  seq->push_back("flatten", nn::Flatten());
  seq->push_back("fc", net.fc);
  return seq;
}

// ResNet9Impl::forward: the residual sums and the scaled head as steps of their own.
nn::Sequential resnet9_form(const ResNet9Impl& net) {
  nn::Sequential seq;
  seq->push_back("prep", net.prep);
  seq->push_back("layer1", net.layer1);
  seq->push_back("res1", Residual(net.res1));
  seq->push_back("layer2", net.layer2);
  seq->push_back("layer3", net.layer3);
  seq->push_back("res3", Residual(net.res3));
  seq->push_back("pool", GlobalMaxPool());
  seq->push_back("fc", net.fc);
  seq->push_back("scale", Scale(0.125));
  return seq;
}

nn::Sequential mlp_form(const MLPImpl& net) {
  nn::Sequential seq;
  for (size_t i = 0; i < net.layers->size(); ++i) seq->push_back("layers." + net.layers->name(i), (*net.layers)[i]);
  return seq;
}

// LeNetImpl::forward: ReLU after each layer but the last, 2x2 max-pools after the convolutions.
nn::Sequential lenet_form(const LeNetImpl& net) {
  nn::Sequential seq;
  seq->push_back("conv1", net.conv1);
  seq->push_back("relu1", nn::ReLU());
  seq->push_back("pool1", nn::MaxPool2d(2));
  seq->push_back("conv2", net.conv2);
  seq->push_back("relu2", nn::ReLU());
  seq->push_back("pool2", nn::MaxPool2d(2));
  seq->push_back("flatten", nn::Flatten());
  seq->push_back("fc1", net.fc1);
  seq->push_back("relu3", nn::ReLU());
  seq->push_back("fc2", net.fc2);
  seq->push_back("relu4", nn::ReLU());
  seq->push_back("fc3", net.fc3);
  return seq;
}

}  // namespace

nn::Sequential as_sequential(const std::shared_ptr<nn::Module>& model) {
  EMBER_CHECK(model != nullptr, "as_sequential: the model is null");
  if (auto seq = std::dynamic_pointer_cast<nn::SequentialImpl>(model)) return nn::Sequential(seq);
  if (auto* net = dynamic_cast<const ResNetImpl*>(model.get())) return resnet_form(*net);
  if (auto* net = dynamic_cast<const ResNet9Impl*>(model.get())) return resnet9_form(*net);
  if (auto* net = dynamic_cast<const MLPImpl*>(model.get())) return mlp_form(*net);
  if (auto* net = dynamic_cast<const LeNetImpl*>(model.get())) return lenet_form(*net);
  EMBER_FAIL("as_sequential: cannot split a ", model->type_name(),
             " into a Sequential of layers: its forward is "
             "not known (known: the ResNets, ResNet9, MLP, LeNet, and Sequential itself)");
}

}  // namespace ember::models
