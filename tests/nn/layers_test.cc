// Every layer against PyTorch 1.13 (tests/nn/layer_reference.json, written by
// tools/golden/make_layer_reference.py): output shape, parameter and buffer names, shapes and
// counts, state_dict keys, repr, and the statistics of the default initialisation.
#include <catch2/catch.hpp>

#include <set>

#include "core/ember_core.h"
#include "nn/nn.h"
#include "tests/nn/layer_zoo.h"

using namespace ember;
using namespace ember::testing;

namespace {

Shape shape_of(const json::Value& array) {
  Shape shape;
  for (const json::Value& d : array.items()) shape.push_back(d.as_int());
  return shape;
}

std::string describe_named(const std::vector<std::pair<std::string, Tensor>>& named, bool with_dtype) {
  std::string s;
  for (const auto& [name, t] : named)
    s += name + " " + shape_str(t.sizes()) + (with_dtype ? std::string(" ") + dtype_name(t.dtype()) : "") + "\n";
  return s;
}

std::string describe_reference(const json::Value& list, bool with_dtype) {
  std::string s;
  for (const json::Value& e : list.items())
    s += e.find("name")->as_string() + " " + shape_str(shape_of(*e.find("shape"))) +
         (with_dtype ? " " + e.find("dtype")->as_string() : "") + "\n";
  return s;
}

}  // namespace

TEST_CASE("the reference file and the Ember factory table cover the same layers", "[nn][layers]") {
  const json::Value& reference = layer_reference();
  std::set<std::string> ids;
  for (const json::Value& layer : reference.find("layers")->items()) ids.insert(layer.find("id")->as_string());
  // Every layer of issue 4 appears in at least one config.
  for (const char* id : {"linear",      "conv2d",     "batchnorm1d", "batchnorm2d",
                         "layernorm",   "dropout",    "relu",        "leaky_relu",
                         "gelu",        "silu",       "sigmoid",     "tanh",
                         "softmax",     "maxpool2d",  "avgpool2d",   "adaptive_avgpool2d",
                         "flatten",     "identity",   "embedding",   "sequential",
                         "module_list", "module_dict"})
    CHECK(ids.count(id) == 1);
  for (const std::string& id : ids) {
    INFO(id);
    CHECK(make_reference_layer(id) != nullptr);
  }
}

TEST_CASE("each layer's shapes, names, counts and repr match PyTorch's", "[nn][layers]") {
  for (const json::Value& layer : layer_reference().find("layers")->items()) {
    const std::string id = layer.find("id")->as_string();
    INFO("config '" << id << "': torch " << layer.find("torch")->as_string());
    manual_seed(0);
    std::shared_ptr<nn::Module> module = make_reference_layer(id);
    REQUIRE(module != nullptr);

    CHECK(describe_named(module->named_parameters(), false) == describe_reference(*layer.find("parameters"), false));
    int64_t count = 0;
    for (const Tensor& p : module->parameters()) {
      count += p.numel();
      CHECK(p.requires_grad());
      CHECK(p.dtype() == kFloat32);
    }
    CHECK(count == layer.find("parameter_count")->as_int());
    CHECK(describe_named(module->named_buffers(), true) == describe_reference(*layer.find("buffers"), true));
    std::string keys, expected_keys;
    for (const auto& [name, t] : module->state_dict()) keys += name + "\n";
    for (const json::Value& k : layer.find("state_dict")->items()) expected_keys += k.as_string() + "\n";
    CHECK(keys == expected_keys);
    CHECK(module->repr() == layer.find("repr")->as_string());

    if (const json::Value* input = layer.find("input")) {
      const Shape shape = shape_of(*input->find("shape"));
      const json::Value* bound = input->find("index_bound");
      Tensor x = bound->is_number() ? randint(0, bound->as_int(), shape) : randn(shape);
      module->eval();
      CHECK(shape_str(module->forward(x).sizes()) == shape_str(shape_of(*layer.find("output_shape"))));
      module->train();
      CHECK(shape_str(module->forward(x).sizes()) == shape_str(shape_of(*layer.find("output_shape"))));
    }
  }
}

TEST_CASE("default initialisation follows PyTorch's distributions", "[nn][layers][init]") {
  for (const json::Value& config : layer_reference().find("init")->items()) {
    const std::string id = config.find("id")->as_string();
    INFO("init config '" << id << "': torch " << config.find("torch")->as_string());
    manual_seed(1);
    std::shared_ptr<nn::Module> module = make_reference_init_layer(id);
    REQUIRE(module != nullptr);
    std::vector<std::pair<std::string, Tensor>> tensors = module->named_parameters();
    for (auto& entry : module->named_buffers()) tensors.push_back(entry);
    REQUIRE(tensors.size() == config.find("tensors")->items().size());
    for (const json::Value& spec : config.find("tensors")->items()) {
      const std::string name = spec.find("name")->as_string();
      INFO(name);
      auto it = std::find_if(tensors.begin(), tensors.end(), [&](const auto& e) { return e.first == name; });
      REQUIRE(it != tensors.end());
      CHECK(shape_str(it->second.sizes()) == shape_str(shape_of(*spec.find("shape"))));
      CHECK(check_distribution(it->second, spec) == "");
    }
  }
}

TEST_CASE("the distribution check rejects a wrong fan, a wrong gain and a wrong family", "[nn][layers][init]") {
  // Conv2d(16, 64, (3, 5)): fan_in 240, fan_out 960. PyTorch's bound is 1 / sqrt(fan_in).
  const json::Value spec = json::parse(R"({"dist": "uniform", "low": -0.0645497224, "high": 0.0645497224})", "spec");
  manual_seed(1);
  Tensor w = empty({64, 16, 3, 5});
  nn::init::kaiming_uniform_(w, std::sqrt(5.0));
  CHECK(check_distribution(w, spec) == "");
  nn::init::kaiming_uniform_(w, std::sqrt(5.0), nn::init::FanMode::FanOut);  // wrong fan
  CHECK(check_distribution(w, spec) != "");
  nn::init::kaiming_uniform_(w, 0.0);  // wrong gain: sqrt(2) instead of sqrt(1/3)
  CHECK(check_distribution(w, spec) != "");
  nn::init::kaiming_uniform_(w, 2.1);  // a gain 4% off
  CHECK(check_distribution(w, spec) != "");
  nn::init::normal_(w, 0.0, 0.0645497224 / std::sqrt(3.0));  // right std, wrong family
  CHECK(check_distribution(w, spec) != "");
}
