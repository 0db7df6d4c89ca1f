// state_dict / load_state_dict: round trips, and a strict load that names every missing key,
// unexpected key and shape/dtype mismatch in one error while a non-strict load returns them.
#include <catch2/catch.hpp>

#include "core/ember_core.h"
#include "nn/nn.h"
#include "tests/autograd/test_util.h"
#include "tests/nn/test_nets.h"

using namespace ember;
using namespace ember::testing;

namespace {

NamedTensors without(NamedTensors state, const std::string& name) {
  state.erase(std::remove_if(state.begin(), state.end(), [&](const auto& e) { return e.first == name; }), state.end());
  return state;
}

NamedTensors replaced(NamedTensors state, const std::string& name, const Tensor& value) {
  for (auto& [key, t] : state)
    if (key == name) t = value;
  return state;
}

// A copy of every value, so later comparisons see what the module held at this point.
std::vector<std::vector<double>> snapshot(const nn::Module& m) {
  std::vector<std::vector<double>> out;
  for (const auto& [name, t] : m.state_dict()) out.push_back(t.to_vector<double>());
  return out;
}

}  // namespace

TEST_CASE("load_state_dict copies every value into the existing tensors", "[nn][state_dict]") {
  auto source = std::make_shared<Net>();
  source->forward(randn({4, 3, 6, 6}));  // running statistics and num_batches_tracked move
  auto target = std::make_shared<Net>();
  Tensor fc_weight = target->fc->weight;
  nn::LoadResult result = target->load_state_dict(source->state_dict());
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  CHECK(result.mismatched_keys.empty());
  CHECK(snapshot(*target) == snapshot(*source));
  // Values were copied: the handles stay valid, the storage stays the target's own.
  CHECK(fc_weight.impl_ptr() == target->fc->weight.impl_ptr());
  CHECK(fc_weight.to_vector<float>() == source->fc->weight.to_vector<float>());
  CHECK(fc_weight.storage().get() != source->fc->weight.storage().get());
  CHECK(fc_weight.is_leaf());
  CHECK(fc_weight.requires_grad());
  CHECK((*target->layer1)[0]->find_child("bn1")->find_buffer("num_batches_tracked")->item<int64_t>() == 1);
  // The non-persistent buffer is neither saved nor expected.
  for (const auto& [name, t] : source->state_dict()) CHECK(name != "mask");
}

TEST_CASE("a strict load names every problem in one error and loads nothing", "[nn][state_dict]") {
  auto net = std::make_shared<Net>();
  NamedTensors state = std::make_shared<Net>()->state_dict();
  state = without(state, "layer1.0.bn1.running_var");                             // missing
  state = without(state, "fc.bias");                                              // missing
  state.emplace_back("fc.extra", zeros({2}));                                     // unexpected
  state.emplace_back("head.weight", zeros({2}));                                  // unexpected
  state = replaced(state, "stem.weight", zeros({4, 3, 5, 5}));                    // shape mismatch
  state = replaced(state, "fc.weight", zeros({10, 4}, TensorOptions(kFloat64)));  // dtype mismatch
  state = replaced(state, "layer1.1.bn2.num_batches_tracked", zeros({}));         // int64 buffer given float32
  const auto before = snapshot(*net);

  std::string message = error_of([&] { net->load_state_dict(state); });
  INFO(message);
  CHECK_THAT(message, Catch::Contains("Net"));
  CHECK_THAT(message, Catch::Contains("missing keys:\n    layer1.0.bn1.running_var\n    fc.bias"));
  CHECK_THAT(message, Catch::Contains("unexpected keys:\n    fc.extra\n    head.weight"));
  CHECK_THAT(message, Catch::Contains("stem.weight: expected [4, 3, 3, 3] float32, got [4, 3, 5, 5] float32"));
  CHECK_THAT(message, Catch::Contains("fc.weight: expected [10, 4] float32, got [10, 4] float64"));
  CHECK_THAT(message, Catch::Contains("layer1.1.bn2.num_batches_tracked: expected [] int64, got [] float32"));
  CHECK(snapshot(*net) == before);  // nothing was loaded
}

TEST_CASE("a non-strict load returns the problems and loads the rest", "[nn][state_dict]") {
  auto source = std::make_shared<Net>();
  auto net = std::make_shared<Net>();
  Tensor stem_before = net->stem->weight.clone();
  NamedTensors state = source->state_dict();
  state = without(state, "fc.bias");
  state.emplace_back("fc.extra", zeros({2}));
  state = replaced(state, "stem.weight", zeros({4, 3, 5, 5}));
  nn::LoadResult result = net->load_state_dict(state, /*strict=*/false);
  CHECK(result.missing_keys == std::vector<std::string>{"fc.bias"});
  CHECK(result.unexpected_keys == std::vector<std::string>{"fc.extra"});
  REQUIRE(result.mismatched_keys.size() == 1);
  CHECK_THAT(result.mismatched_keys[0], Catch::StartsWith("stem.weight: expected [4, 3, 3, 3] float32"));
  CHECK(net->stem->weight.to_vector<float>() == stem_before.to_vector<float>());       // mismatched: kept
  CHECK(net->fc->weight.to_vector<float>() == source->fc->weight.to_vector<float>());  // loaded
  CHECK(net->fc->bias.to_vector<float>() != source->fc->bias.to_vector<float>());      // missing: kept
}

TEST_CASE("a state saved through a wrapper: the error suggests strip_prefix, which fixes it", "[nn][state_dict]") {
  auto net = std::make_shared<Net>();
  NamedTensors prefixed;
  for (const auto& [name, t] : std::make_shared<Net>()->state_dict()) prefixed.emplace_back("module." + name, t);
  CHECK_THAT(error_of([&] { net->load_state_dict(prefixed); }), Catch::Contains("nn::strip_prefix"));
  nn::LoadResult result = net->load_state_dict(nn::strip_prefix(prefixed, "module."));
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
}

TEST_CASE("state_dict round trip through a safetensors file", "[nn][state_dict]") {
  auto source = std::make_shared<Net>();
  source->forward(randn({2, 3, 6, 6}));
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/state_dict_test.safetensors";
  save_safetensors(path, source->state_dict());
  auto target = std::make_shared<Net>();
  target->load_state_dict(load_safetensors(path).tensors);
  CHECK(snapshot(*target) == snapshot(*source));
}
