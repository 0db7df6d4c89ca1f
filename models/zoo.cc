// The name → constructor table behind make_model.
#include "models/zoo.h"

#include <functional>
#include <map>

#include "models/resnet.h"
#include "models/small.h"

namespace ember::models {

namespace {

// (in_channels, image_height, image_width, num_classes) -> model
using Factory = std::function<std::shared_ptr<nn::Module>(int64_t, int64_t, int64_t, int64_t)>;

const std::vector<std::pair<std::string, Factory>>& table() {
  static const std::vector<std::pair<std::string, Factory>> entries = [] {
    std::vector<std::pair<std::string, Factory>> t;
    for (int64_t depth : {20, 32, 44, 56, 110}) {
      t.emplace_back("resnet" + std::to_string(depth), [depth](int64_t c, int64_t, int64_t, int64_t k) {
        return cifar_resnet(depth, c, k, Shortcut::A).ptr();
      });
      t.emplace_back("resnet" + std::to_string(depth) + "-b", [depth](int64_t c, int64_t, int64_t, int64_t k) {
        return cifar_resnet(depth, c, k, Shortcut::B).ptr();
      });
    }
    t.emplace_back("resnet18",
                   [](int64_t c, int64_t, int64_t, int64_t k) { return resnet18(c, k, Stem::Cifar).ptr(); });
    t.emplace_back("resnet34",
                   [](int64_t c, int64_t, int64_t, int64_t k) { return resnet34(c, k, Stem::Cifar).ptr(); });
    t.emplace_back("resnet18-imagenet", [](int64_t c, int64_t, int64_t, int64_t k) { return resnet18(c, k).ptr(); });
    t.emplace_back("resnet34-imagenet", [](int64_t c, int64_t, int64_t, int64_t k) { return resnet34(c, k).ptr(); });
    t.emplace_back("resnet50", [](int64_t c, int64_t, int64_t, int64_t k) { return resnet50(c, k).ptr(); });
    t.emplace_back("resnet9", [](int64_t c, int64_t, int64_t, int64_t k) { return ResNet9(c, k).ptr(); });
    t.emplace_back("mlp", [](int64_t c, int64_t h, int64_t w, int64_t k) {
      return MLP(c * h * w, std::vector<int64_t>{512, 256}, k).ptr();
    });
    t.emplace_back("lenet", [](int64_t c, int64_t h, int64_t w, int64_t k) { return LeNet(c, h, w, k).ptr(); });
    return t;
  }();
  return entries;
}

}  // namespace

std::shared_ptr<nn::Module> make_model(const std::string& name, int64_t in_channels, int64_t image_height,
                                       int64_t image_width, int64_t num_classes) {
  for (const auto& [key, factory] : table())
    if (key == name) return factory(in_channels, image_height, image_width, num_classes);
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  EMBER_FAIL("make_model: unknown model '", name, "' (known: ", known, ")");
}

std::shared_ptr<nn::Module> make_model(const std::string& name, int64_t in_channels, int64_t image_size,
                                       int64_t num_classes) {
  return make_model(name, in_channels, image_size, image_size, num_classes);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& [key, factory] : table()) names.push_back(key);
  return names;
}

}  // namespace ember::models
