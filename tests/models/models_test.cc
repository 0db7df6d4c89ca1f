// The model zoo against PyTorch. [rgb] and [imagenet]: every models/zoo.h model built for 3x32x32
// (ImageNet-stem ones with 1000 classes) has PyTorch's parameter count, maps [2, 3, 32, 32] and
// [2, 3, 20, 24] to finite logits [2, classes], and names itself and both shapes when given 1
// channel; ResNet-18 (CIFAR stem) and ResNet-20 have PyTorch's state_dict names and shapes.
// [gray]: the CIFAR-stem models built for 1x28x28 (Fashion-MNIST). [zoo]: the reference counts
// cover the zoo and round to the published ones; make_model's errors. Expected counts and names
// come from tools/golden/make_model_reference.py.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <tuple>

#include "core/ember_core.h"
#include "models/zoo.h"
#include "tests/autograd/test_util.h"

using namespace ember;
using ember::testing::error_of;

namespace {

struct Count {
  const char* name;
  int64_t channels, height, width, classes;
  int64_t parameters;  // PyTorch's sum(p.numel() for p in model.parameters())
};

// Printed by /usr/bin/python3 tools/golden/make_model_reference.py (PyTorch 1.13).
const Count kPyTorchCounts[] = {
    {"resnet20", 3, 32, 32, 10, 269722},
    {"resnet20-b", 3, 32, 32, 10, 272474},
    {"resnet32", 3, 32, 32, 10, 464154},
    {"resnet32-b", 3, 32, 32, 10, 466906},
    {"resnet44", 3, 32, 32, 10, 658586},
    {"resnet44-b", 3, 32, 32, 10, 661338},
    {"resnet56", 3, 32, 32, 10, 853018},
    {"resnet56-b", 3, 32, 32, 10, 855770},
    {"resnet110", 3, 32, 32, 10, 1727962},
    {"resnet110-b", 3, 32, 32, 10, 1730714},
    {"resnet18", 3, 32, 32, 10, 11173962},
    {"resnet34", 3, 32, 32, 10, 21282122},
    {"resnet18-imagenet", 3, 32, 32, 1000, 11689512},
    {"resnet34-imagenet", 3, 32, 32, 1000, 21797672},
    {"resnet50", 3, 32, 32, 1000, 25557032},
    {"resnet9", 3, 32, 32, 10, 6573120},
    {"mlp", 3, 32, 32, 10, 1707274},
    {"lenet", 3, 32, 32, 10, 62006},
    {"resnet20", 1, 28, 28, 10, 269434},
    {"resnet20-b", 1, 28, 28, 10, 272186},
    {"resnet32", 1, 28, 28, 10, 463866},
    {"resnet32-b", 1, 28, 28, 10, 466618},
    {"resnet44", 1, 28, 28, 10, 658298},
    {"resnet44-b", 1, 28, 28, 10, 661050},
    {"resnet56", 1, 28, 28, 10, 852730},
    {"resnet56-b", 1, 28, 28, 10, 855482},
    {"resnet110", 1, 28, 28, 10, 1727674},
    {"resnet110-b", 1, 28, 28, 10, 1730426},
    {"resnet18", 1, 28, 28, 10, 11172810},
    {"resnet34", 1, 28, 28, 10, 21280970},
    {"resnet18-imagenet", 1, 28, 28, 10, 11175370},
    {"resnet34-imagenet", 1, 28, 28, 10, 21283530},
    {"resnet50", 1, 28, 28, 10, 23522250},
    {"resnet9", 1, 28, 28, 10, 6571968},
    {"mlp", 1, 28, 28, 10, 535818},
    {"lenet", 1, 28, 28, 10, 44426},
    {"mlp", 3, 20, 24, 10, 871690},
    {"lenet", 3, 20, 24, 10, 25526},
};

int64_t pytorch_count(const std::string& name, int64_t c, int64_t h, int64_t w, int64_t k) {
  for (const Count& e : kPyTorchCounts)
    if (name == e.name && c == e.channels && h == e.height && w == e.width && k == e.classes) return e.parameters;
  FAIL("no PyTorch count for " << name << " " << c << "x" << h << "x" << w << ", " << k << " classes");
  return -1;
}

bool imagenet_stem(const std::string& name) {
  return name == "resnet18-imagenet" || name == "resnet34-imagenet" || name == "resnet50";
}

// Each configuration is built once per test binary: building (initialising) ResNet-50 costs far
// more than its forward pass on a batch of two small images.
nn::Module& model_for(const std::string& name, int64_t c, int64_t h, int64_t w, int64_t k) {
  static std::map<std::tuple<std::string, int64_t, int64_t, int64_t, int64_t>, std::shared_ptr<nn::Module>> cache;
  auto& slot = cache[{name, c, h, w, k}];
  if (!slot) {
    manual_seed(11);
    slot = models::make_model(name, c, h, w, k);
  }
  return *slot;
}

int64_t parameter_count(const nn::Module& model) {
  int64_t count = 0;
  for (const Tensor& p : model.parameters()) count += p.numel();
  return count;
}

void check_logits(nn::Module& model, const Tensor& images, int64_t classes) {
  NoGradGuard no_grad;
  Tensor logits = model.forward(images);
  REQUIRE(logits.sizes() == Shape{images.size(0), classes});
  for (double v : logits.to_vector<double>()) REQUIRE(std::isfinite(v));
}

// "name [d0, d1, ...]" lines of a file written by make_model_reference.py ('#' lines are comments).
std::vector<std::pair<std::string, std::string>> read_state_dict_file(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<std::pair<std::string, std::string>> entries;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.find(' ');
    entries.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return entries;
}

std::vector<std::pair<std::string, std::string>> state_dict_of(const nn::Module& model) {
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto& [name, t] : model.state_dict()) entries.emplace_back(name, shape_str(t.sizes()));
  return entries;
}

// Built for 3x32x32: PyTorch's parameter count, finite logits for [2, 3, 32, 32] and [2, 3, 20, 24]
// (MLP and LeNet are rebuilt for that size; the ResNets take any size), and 1 channel refused.
void check_rgb_model(const std::string& name) {
  INFO(name);
  manual_seed(7);
  Tensor cifar = randn({2, 3, 32, 32}), odd = randn({2, 3, 20, 24}), gray = zeros({2, 1, 32, 32});
  const int64_t classes = imagenet_stem(name) ? 1000 : 10;
  nn::Module& model = model_for(name, 3, 32, 32, classes);
  CHECK(parameter_count(model) == pytorch_count(name, 3, 32, 32, classes));
  check_logits(model, cifar, classes);
  bool sized = name == "mlp" || name == "lenet";
  nn::Module& odd_model = sized ? model_for(name, 3, 20, 24, 10) : model;
  if (sized) CHECK(parameter_count(odd_model) == pytorch_count(name, 3, 20, 24, 10));
  check_logits(odd_model, odd, sized ? 10 : classes);

  std::string message = error_of([&] { model.forward(gray); });
  CHECK_THAT(message, Catch::StartsWith(model.type_name() + ": expected input [N, "));
  CHECK_THAT(message, Catch::EndsWith("got [2, 1, 32, 32]"));
  if (name == "mlp")
    CHECK_THAT(message, Catch::Contains("3072 features"));
  else
    CHECK_THAT(message, Catch::Contains("[N, 3, "));
}

}  // namespace

TEST_CASE("3-channel CIFAR-stem models: PyTorch's parameter count, logits at 3x32x32 and 3x20x24, channel errors",
          "[models][rgb]") {
  for (const std::string& name : models::model_names())
    if (!imagenet_stem(name)) check_rgb_model(name);
  CHECK(error_of([] {
          model_for("resnet20", 3, 32, 32, 10).forward(zeros({3, 32, 32}));
        }) == "ResNet20: expected input [N, 3, H, W], got [3, 32, 32]");
  CHECK(error_of([] {
          model_for("lenet", 3, 32, 32, 10).forward(zeros({2, 3, 28, 28}));
        }) == "LeNet: expected input [N, 3, 32, 32], got [2, 3, 28, 28]");
  CHECK(error_of([] {
          model_for("resnet9", 3, 32, 32, 10).forward(zeros({2, 1, 32, 32}));
        }) == "ResNet9: expected input [N, 3, H, W], got [2, 1, 32, 32]");
}

TEST_CASE("ImageNet-stem models, 1000 classes: the same on small images", "[models][imagenet]") {
  for (const std::string& name : models::model_names())
    if (imagenet_stem(name)) check_rgb_model(name);
}

TEST_CASE("ResNet-18 (CIFAR stem) and ResNet-20 state_dicts have PyTorch's names and shapes", "[models][rgb]") {
  auto resnet18 = read_state_dict_file("tests/models/resnet18_state_dict.txt");
  REQUIRE(resnet18.size() == 122);
  CHECK(state_dict_of(model_for("resnet18", 3, 32, 32, 10)) == resnet18);
  auto resnet20 = read_state_dict_file("tests/models/resnet20_state_dict.txt");
  REQUIRE(resnet20.size() == 116);
  CHECK(state_dict_of(model_for("resnet20", 3, 32, 32, 10)) == resnet20);
}

// The ImageNet-stem models are left out here: building them is most of the cost, and their
// 3-channel builds above cover them (only conv1 depends on the channel count).
TEST_CASE("1-channel models (Fashion-MNIST): PyTorch's parameter count and logits at 1x28x28", "[models][gray]") {
  manual_seed(8);
  Tensor images = randn({2, 1, 28, 28});
  for (const std::string& name : models::model_names()) {
    if (imagenet_stem(name)) continue;
    INFO(name);
    nn::Module& model = model_for(name, 1, 28, 28, 10);
    CHECK(parameter_count(model) == pytorch_count(name, 1, 28, 28, 10));
    check_logits(model, images, 10);
    model.eval();
    check_logits(model, images, 10);
  }
}

TEST_CASE("The reference counts cover the zoo and round to the published ones", "[models][zoo]") {
  for (const std::string& name : models::model_names()) {
    INFO(name);
    pytorch_count(name, 3, 32, 32, imagenet_stem(name) ? 1000 : 10);
    pytorch_count(name, 1, 28, 28, 10);
  }
  // He et al. 2016, Table 6 (CIFAR-10, option A); the CIFAR ResNet-18/34 of common CIFAR code;
  // torchvision's model cards (ImageNet stem, 1000 classes); Page's ResNet-9.
  auto millions = [](const char* name, int64_t classes) { return pytorch_count(name, 3, 32, 32, classes) / 1e6; };
  CHECK(millions("resnet20", 10) == Approx(0.27).margin(0.005));
  CHECK(millions("resnet32", 10) == Approx(0.46).margin(0.005));
  CHECK(millions("resnet44", 10) == Approx(0.66).margin(0.005));
  CHECK(millions("resnet56", 10) == Approx(0.85).margin(0.005));
  CHECK(millions("resnet110", 10) == Approx(1.7).margin(0.05));
  CHECK(millions("resnet18", 10) == Approx(11.17).margin(0.005));
  CHECK(millions("resnet34", 10) == Approx(21.28).margin(0.005));
  CHECK(millions("resnet18-imagenet", 1000) == Approx(11.69).margin(0.005));
  CHECK(millions("resnet34-imagenet", 1000) == Approx(21.80).margin(0.005));
  CHECK(millions("resnet50", 1000) == Approx(25.56).margin(0.005));
  CHECK(millions("resnet9", 10) == Approx(6.57).margin(0.005));
}

TEST_CASE("make_model names an unknown model and lists the known ones", "[models][zoo]") {
  std::string message = error_of([] { models::make_model("resnet19", 3, 32, 10); });
  CHECK_THAT(message, Catch::StartsWith("make_model: unknown model 'resnet19' (known: resnet20, resnet20-b,"));
  for (const char* name : {"resnet110-b", "resnet18-imagenet", "resnet34", "resnet50", "resnet9", "mlp", "lenet"})
    CHECK_THAT(message, Catch::Contains(name));
  CHECK_THAT(error_of([] { models::make_model("lenet", 1, 12, 10); }),
             Catch::Contains("LeNet: images must be at least 16x16 pixels, got 12x12"));
}
