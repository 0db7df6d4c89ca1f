// Finite-difference gradient checks (float64) through each layer module's forward: the input and
// every parameter are gradcheck leaves, bound into the module's parameter fields for the call, so
// the module's own wiring (options, bias, groups, train/eval statistics) is what is checked.
#include <catch2/catch.hpp>

#include "core/ember_core.h"
#include "nn/nn.h"
#include "tests/autograd/gradcheck.h"

using namespace ember;
using namespace ember::testing;

namespace {

// A case whose first input is the layer's input (spec) and whose further inputs replace the
// module's parameter fields, in order (their shapes are the fields' shapes).
template <typename Holder>
GradCase layer_case(const std::string& name, Holder layer, InputSpec input, std::vector<Tensor*> fields) {
  layer->to(kFloat64);
  std::vector<InputSpec> specs = {std::move(input)};
  for (Tensor* field : fields) specs.push_back({.shape = field->sizes()});
  auto module = layer.ptr();
  return {.name = name,
          .fn =
              [module, fields](const Inputs& x) {
                for (size_t i = 0; i < fields.size(); ++i) *fields[i] = x[i + 1];
                return module->forward(x[0]);
              },
          .inputs = specs};
}

void require_gradcheck(const GradCase& c) {
  GradCheckResult result = gradcheck(c, Device(kCPU));
  INFO(result.message);
  CHECK(result.ok);
}

}  // namespace

TEST_CASE("gradcheck: Linear", "[nn][gradcheck]") {
  nn::Linear with_bias(4, 3);
  require_gradcheck(layer_case("linear", with_bias, {.shape = {2, 4}}, {&with_bias->weight, &with_bias->bias}));
  nn::Linear no_bias(nn::LinearOptions(4, 3).bias(false));
  require_gradcheck(layer_case("linear.no_bias.3d", no_bias, {.shape = {2, 2, 4}}, {&no_bias->weight}));
}

TEST_CASE("gradcheck: Conv2d", "[nn][gradcheck]") {
  nn::Conv2d plain(nn::Conv2dOptions(2, 3, 3).padding(1));
  require_gradcheck(layer_case("conv2d", plain, {.shape = {2, 2, 4, 5}}, {&plain->weight, &plain->bias}));
  nn::Conv2d options(
      nn::Conv2dOptions(4, 6, Size2(3, 2)).stride(Size2(2, 1)).padding(Size2(1, 0)).dilation(Size2(1, 2)).groups(2));
  require_gradcheck(layer_case("conv2d.options", options, {.shape = {2, 4, 6, 7}}, {&options->weight, &options->bias}));
}

TEST_CASE("gradcheck: BatchNorm1d and BatchNorm2d in training and evaluation", "[nn][gradcheck]") {
  nn::BatchNorm1d bn1(3);
  require_gradcheck(layer_case("batchnorm1d.train", bn1, {.shape = {5, 3}}, {&bn1->weight, &bn1->bias}));
  require_gradcheck(layer_case("batchnorm1d.train.3d", bn1, {.shape = {4, 3, 2}}, {&bn1->weight, &bn1->bias}));
  nn::BatchNorm2d bn2(2);
  require_gradcheck(layer_case("batchnorm2d.train", bn2, {.shape = {3, 2, 2, 3}}, {&bn2->weight, &bn2->bias}));
  bn2->eval();
  {
    NoGradGuard no_grad;
    bn2->running_mean.copy_(tensor<double>({0.3, -0.2}));
    bn2->running_var.copy_(tensor<double>({0.5, 2.0}));
  }
  require_gradcheck(layer_case("batchnorm2d.eval", bn2, {.shape = {3, 2, 2, 3}}, {&bn2->weight, &bn2->bias}));
  nn::BatchNorm2d no_stats(nn::BatchNormOptions(2).track_running_stats(false));
  no_stats->eval();  // no running statistics: batch statistics even in evaluation
  require_gradcheck(
      layer_case("batchnorm2d.no_stats", no_stats, {.shape = {3, 2, 2, 2}}, {&no_stats->weight, &no_stats->bias}));
}

TEST_CASE("gradcheck: LayerNorm", "[nn][gradcheck]") {
  nn::LayerNorm ln(Shape{3, 2});
  require_gradcheck(layer_case("layernorm", ln, {.shape = {2, 3, 2}}, {&ln->weight, &ln->bias}));
  nn::LayerNorm plain(nn::LayerNormOptions({4}).elementwise_affine(false));
  require_gradcheck(layer_case("layernorm.plain", plain, {.shape = {3, 4}}, {}));
}

TEST_CASE("gradcheck: Embedding, and no gradient into the padding row", "[nn][gradcheck]") {
  nn::Embedding embedding(5, 3);
  embedding->to(kFloat64);
  const Tensor indices = tensor<int64_t>({0, 3, 3, 4, 1, 0}, {2, 3});
  GradCase c{.name = "embedding",
             .fn =
                 [embedding, indices](const Inputs& x) {
                   embedding->weight = x[0];
                   return embedding(indices);
                 },
             .inputs = {{.shape = {5, 3}}}};
  require_gradcheck(c);

  nn::Embedding padded(nn::EmbeddingOptions(5, 3).padding_idx(1));
  padded(tensor<int64_t>({1, 2, 1, 4})).sum().backward();
  std::vector<float> grad = padded->weight.grad().to_vector<float>();
  CHECK(std::vector<float>(grad.begin() + 3, grad.begin() + 6) == std::vector<float>{0, 0, 0});  // row 1: padding
  CHECK(std::vector<float>(grad.begin() + 6, grad.begin() + 9) == std::vector<float>{1, 1, 1});  // row 2: used once
  CHECK(grad[0] == 0.0f);                                                                        // row 0: unused
}

TEST_CASE("gradcheck: Dropout with a fixed mask, and identity in evaluation", "[nn][gradcheck]") {
  nn::Dropout dropout(0.4);
  auto generator = std::make_shared<Generator>(5);
  dropout->generator = generator.get();
  GradCase c{.name = "dropout",
             .fn =
                 [dropout, generator](const Inputs& x) {
                   generator->manual_seed(5);  // the same mask on every evaluation
                   return dropout(x[0]);
                 },
             .inputs = {{.shape = {4, 6}}}};
  require_gradcheck(c);
  dropout->eval();
  Tensor x = randn({3, 4});
  CHECK(dropout(x).to_vector<float>() == x.to_vector<float>());
}

TEST_CASE("gradcheck: the parameterless layers", "[nn][gradcheck]") {
  const InputSpec away_from_zero{.shape = {2, 3, 4}, .avoid = {0.0}};
  const InputSpec image{.shape = {2, 2, 5, 4}};
  require_gradcheck(layer_case("relu", nn::ReLU(), away_from_zero, {}));
  require_gradcheck(layer_case("leaky_relu", nn::LeakyReLU(0.2), away_from_zero, {}));
  require_gradcheck(layer_case("gelu", nn::GELU(), {.shape = {2, 3}}, {}));
  require_gradcheck(layer_case("gelu.tanh", nn::GELU("tanh"), {.shape = {2, 3}}, {}));
  require_gradcheck(layer_case("silu", nn::SiLU(), {.shape = {2, 3}}, {}));
  require_gradcheck(layer_case("sigmoid", nn::Sigmoid(), {.shape = {2, 3}}, {}));
  require_gradcheck(layer_case("tanh", nn::Tanh(), {.shape = {2, 3}}, {}));
  require_gradcheck(layer_case("softmax", nn::Softmax(1), {.shape = {2, 3, 2}}, {}));
  require_gradcheck(layer_case("maxpool2d", nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(1).padding(1)), image, {}));
  require_gradcheck(layer_case("avgpool2d", nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(2).padding(1)), image, {}));
  require_gradcheck(layer_case("adaptive_avgpool2d", nn::AdaptiveAvgPool2d(Size2(2, 3)), image, {}));
  require_gradcheck(layer_case("flatten", nn::Flatten(), image, {}));
  require_gradcheck(layer_case("identity", nn::Identity(), image, {}));
}

TEST_CASE("gradcheck: Sequential reaches every layer's parameters", "[nn][gradcheck]") {
  nn::Linear first(3, 4), last(4, 2);
  nn::Sequential sequential(first, nn::Tanh(), last);
  require_gradcheck(layer_case("sequential", sequential, {.shape = {2, 3}},
                               {&first->weight, &first->bias, &last->weight, &last->bias}));
}
