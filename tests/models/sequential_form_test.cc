// models::as_sequential on every zoo model (and small Bottleneck ResNets of both stems and both
// shortcuts): the Sequential shares the model's parameters and buffers under the model's keys, in
// its order; a training step through it equals the model's bit for bit on the CPU (outputs, the
// input's and every parameter's gradient, running statistics), and so does evaluation. Models it
// cannot split name their type.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "core/ember_core.h"
#include "models/resnet.h"
#include "models/sequential_form.h"
#include "models/zoo.h"
#include "tests/autograd/test_util.h"

using namespace ember;
using ember::testing::error_of;
using ember::testing::values;

namespace {

std::vector<std::string> keys_of(const NamedTensors& state) {
  std::vector<std::string> out;
  for (const auto& [name, t] : state) out.push_back(name);
  return out;
}

// Every parameter and buffer of `seq` is the model's own tensor, under the model's name.
void check_shared(const nn::Module& seq, const nn::Module& model) {
  CHECK(keys_of(seq.state_dict()) == keys_of(model.state_dict()));
  for (bool parameters : {true, false}) {
    auto ours = parameters ? seq.named_parameters() : seq.named_buffers();
    auto theirs = parameters ? model.named_parameters() : model.named_buffers();
    REQUIRE(ours.size() == theirs.size());
    for (size_t i = 0; i < ours.size(); ++i) {
      INFO(theirs[i].first);
      CHECK(ours[i].first == theirs[i].first);
      CHECK(ours[i].second.impl_ptr() == theirs[i].second.impl_ptr());
    }
  }
}

void check_same_values(const std::string& what, const Tensor& actual, const Tensor& expected) {
  INFO(what);
  REQUIRE(actual.defined() == expected.defined());
  if (!expected.defined()) return;
  REQUIRE(actual.sizes() == expected.sizes());
  CHECK(values(actual) == values(expected));
}

// `model` and a clone of it, one trained through as_sequential(clone): one training step (forward,
// backward from a random upstream gradient) and an evaluation agree bit for bit.
void check_same_training(const std::shared_ptr<nn::Module>& model, const Shape& input_shape) {
  auto twin = model->clone();
  nn::Sequential seq = models::as_sequential(twin);
  check_shared(*seq, *twin);
  CHECK(keys_of(seq->state_dict()) == keys_of(model->state_dict()));
  model->train();
  seq->train();
  Generator g(17);
  Tensor x = randn(input_shape, {}, &g);
  Tensor a = x.detach().requires_grad_(true), b = x.detach().requires_grad_(true);
  Tensor expected = model->forward(a), actual = seq(b);
  check_same_values("training output", actual, expected);
  Tensor upstream = randn(expected.sizes(), {}, &g);
  expected.backward(upstream);
  actual.backward(upstream);
  check_same_values("input gradient", b.grad(), a.grad());
  auto ours = twin->named_parameters(), theirs = model->named_parameters();
  REQUIRE(ours.size() == theirs.size());
  for (size_t i = 0; i < ours.size(); ++i)
    check_same_values(ours[i].first + ".grad", ours[i].second.grad(), theirs[i].second.grad());
  auto our_buffers = twin->named_buffers(), their_buffers = model->named_buffers();
  REQUIRE(our_buffers.size() == their_buffers.size());
  for (size_t i = 0; i < our_buffers.size(); ++i)
    check_same_values(our_buffers[i].first, our_buffers[i].second, their_buffers[i].second);

  model->eval();
  seq->eval();
  NoGradGuard no_grad;
  check_same_values("evaluation output", seq(x), model->forward(x));
}

models::ResNet small_bottleneck(models::Stem stem, models::Shortcut shortcut) {
  models::ResNetConfig c;
  c.bottleneck = true;
  c.blocks = {1, 2};
  c.widths = {3, 5};
  c.stem_width = 6;
  c.stem = stem;
  c.shortcut = shortcut;
  c.in_channels = 2;
  c.num_classes = 5;
  c.name = "SmallBottleneck";
  return models::ResNet(c);
}

// The large ImageNet-size ResNets cost most of this test's time (building them), the more so
// under AddressSanitizer, where their smaller siblings (and the small Bottleneck ResNets) cover
// the same code.
bool covered(const std::string& name) {
#if defined(__SANITIZE_ADDRESS__)
  return name != "resnet34" && name != "resnet34-imagenet" && name != "resnet50" && name != "resnet56" &&
         name != "resnet56-b" && name != "resnet110" && name != "resnet110-b" && name != "resnet44" &&
         name != "resnet44-b";
#else
  (void)name;
  return true;
#endif
}

}  // namespace

TEST_CASE("as_sequential: every zoo model trains and evaluates bit for bit as the model", "[models][sequential]") {
  // Odd sizes that every zoo model accepts (LeNet needs 16 pixels a side).
  const int64_t channels = 3, height = 17, width = 16, classes = 7;
  for (const std::string& name : models::model_names()) {
    if (!covered(name)) continue;
    INFO(name);
    manual_seed(23);
    check_same_training(models::make_model(name, channels, height, width, classes), {3, channels, height, width});
  }
}

TEST_CASE("as_sequential: Bottleneck ResNets of either stem and shortcut, and the entries' names",
          "[models][sequential]") {
  for (auto stem : {models::Stem::Cifar, models::Stem::ImageNet}) {
    for (auto shortcut : {models::Shortcut::A, models::Shortcut::B}) {
      INFO("ImageNet stem " << (stem == models::Stem::ImageNet) << ", shortcut B "
                            << (shortcut == models::Shortcut::B));
      manual_seed(29);
      check_same_training(small_bottleneck(stem, shortcut).ptr(), {4, 2, 13, 11});
    }
  }
  auto names = [](const nn::Sequential& seq) {
    std::vector<std::string> out;
    for (size_t i = 0; i < seq->size(); ++i) out.push_back(seq->name(i));
    return out;
  };
  CHECK(names(models::as_sequential(small_bottleneck(models::Stem::ImageNet, models::Shortcut::B).ptr())) ==
        std::vector<std::string>{"conv1", "bn1", "relu", "maxpool", "layer1.0", "layer2.0", "layer2.1", "avgpool",
                                 "flatten", "fc"});
  CHECK(names(models::as_sequential(models::make_model("resnet9", 3, 16, 10))) ==
        std::vector<std::string>{"prep", "layer1", "res1", "layer2", "layer3", "res3", "pool", "fc", "scale"});
  CHECK(names(models::as_sequential(models::make_model("mlp", 1, 16, 10))) ==
        std::vector<std::string>{"layers.0", "layers.1", "layers.2", "layers.3", "layers.4", "layers.5"});
  CHECK(names(models::as_sequential(models::make_model("lenet", 1, 16, 10))) ==
        std::vector<std::string>{"conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "flatten", "fc1", "relu3", "fc2",
                                 "relu4", "fc3"});
}

TEST_CASE("as_sequential: a Sequential is itself; other models are refused by type", "[models][sequential]") {
  nn::Sequential seq(nn::Linear(2, 3), nn::ReLU());
  CHECK(models::as_sequential(seq.ptr()).ptr() == seq.ptr());
  CHECK(error_of([] { models::as_sequential(nn::Linear(2, 3).ptr()); }) ==
        "as_sequential: cannot split a Linear into a Sequential of layers: its forward is not known (known: the "
        "ResNets, ResNet9, MLP, LeNet, and Sequential itself)");
  CHECK(error_of([] { models::as_sequential(nullptr); }) == "as_sequential: the model is null");
}

TEST_CASE("as_sequential shares the layers: a step through it trains the model", "[models][sequential]") {
  manual_seed(31);
  auto model = models::make_model("resnet20", 1, 12, 4);
  nn::Sequential seq = models::as_sequential(model);
  check_shared(*seq, *model);
  Tensor before = model->named_parameters().back().second.detach().clone();
  seq(randn({2, 1, 12, 12})).sum().backward();
  NoGradGuard no_grad;
  for (Tensor& p : seq->parameters()) p.sub_(p.grad() * 0.1);
  CHECK(values(model->named_parameters().back().second) != values(before));
}
