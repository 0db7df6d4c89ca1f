// nn::Sequential's entries: named ones ("conv1.weight" keys), unnamed ones named by index, dotted
// names that nest ("layer1.0.conv1.weight"), the naming errors, clone() keeping names and values,
// and a BatchNorm followed by a ReLU running fused with the two-op results.
#include <catch2/catch.hpp>

#include <algorithm>

#include "autograd/node.h"
#include "core/ember_core.h"
#include "nn/nn.h"
#include "nn/optim/sgd.h"
#include "tests/autograd/test_util.h"
#include "tests/nn/test_nets.h"

using namespace ember;
using namespace ember::testing;

namespace {

std::vector<std::string> keys_of(const NamedTensors& state) {
  std::vector<std::string> out;
  for (const auto& [name, t] : state) out.push_back(name);
  return out;
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

// Net's layers as one Sequential under Net's own names (Net scales its input by a buffer first;
// it holds ones, so leaving it out changes nothing).
nn::Sequential flattened(const Net& net) {
  nn::Sequential seq;
  seq->push_back("stem", net.stem);
  seq->push_back("layer1.0", (*net.layer1)[0]);
  seq->push_back("layer1.1", (*net.layer1)[1]);
  seq->push_back("pool", net.pool);
  seq->push_back("flatten", net.flatten);
  seq->push_back("fc", net.fc);
  return seq;
}

}  // namespace

TEST_CASE("Sequential entries may carry names; unnamed entries keep their index", "[nn][sequential]") {
  manual_seed(3);
  nn::Linear first(5, 7), last(7, 3);
  nn::Sequential seq;
  seq->push_back("first", first);
  seq->push_back(nn::Tanh());
  seq->push_back("last", last);
  seq->push_back(std::make_shared<nn::ReLUImpl>());
  REQUIRE(seq->size() == 4);
  CHECK(seq->name(0) == "first");
  CHECK(seq->name(1) == "1");
  CHECK(seq->name(2) == "last");
  CHECK(seq->name(3) == "3");
  CHECK((*seq)[0] == first.ptr());
  CHECK((*seq)[2] == last.ptr());
  CHECK((*seq)[1]->type_name() == "Tanh");
  CHECK(keys_of(seq->state_dict()) ==
        std::vector<std::string>{"first.weight", "first.bias", "last.weight", "last.bias"});
  CHECK(names_of(seq->named_parameters()) == keys_of(seq->state_dict()));
  std::vector<std::string> children;
  for (const auto& [name, child] : seq->named_children()) children.push_back(name);
  CHECK(children == std::vector<std::string>{"first", "1", "last", "3"});

  Tensor x = randn({4, 5});
  CHECK(values(seq(x)) == values(last(first(x).tanh()).relu()));
  CHECK_THAT(error_of([&] { seq->name(4); }), Catch::Contains("index 4 is out of range for 4"));
  CHECK_THAT(error_of([&] { (*seq)[4]; }), Catch::Contains("index 4 is out of range for 4"));
}

TEST_CASE("dotted entry names nest, so a model's flattened layers keep its keys", "[nn][sequential]") {
  manual_seed(5);
  auto net = std::make_shared<Net>();
  nn::Sequential seq = flattened(*net);
  REQUIRE(seq->size() == 6);
  CHECK(seq->name(1) == "layer1.0");
  CHECK((*seq)[1] == (*net->layer1)[0]);

  // Net's keys but its own "scale" buffer, in the same order; the tensors themselves are shared.
  NamedTensors expected = net->state_dict();
  expected.erase(expected.begin());
  REQUIRE(expected.size() > 0);
  CHECK(keys_of(seq->state_dict()) == keys_of(expected));
  auto ours = seq->named_parameters(), theirs = net->named_parameters();
  REQUIRE(ours.size() == theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    CHECK(ours[i].first == theirs[i].first);
    CHECK(ours[i].second.impl_ptr() == theirs[i].second.impl_ptr());
  }
  std::vector<std::string> modules;
  for (const auto& [name, m] : seq->named_modules()) modules.push_back(name);
  CHECK(modules == std::vector<std::string>{"", "stem", "layer1", "layer1.0", "layer1.0.conv1", "layer1.0.bn1",
                                            "layer1.0.conv2", "layer1.0.bn2", "layer1.1", "layer1.1.conv1",
                                            "layer1.1.bn1", "layer1.1.conv2", "layer1.1.bn2", "pool", "flatten", "fc"});

  // The same forward: training-mode batch norm, so compare with a twin for the running stats.
  auto twin = std::dynamic_pointer_cast<Net>(net->clone());
  Tensor x = randn({3, 3, 6, 5});
  CHECK(values(seq(x)) == values(twin->forward(x)));
  NamedTensors twin_state = twin->state_dict();
  for (const auto& [name, t] : seq->state_dict()) {
    INFO(name);
    auto it = std::find_if(twin_state.begin(), twin_state.end(), [&](const auto& e) { return e.first == name; });
    REQUIRE(it != twin_state.end());
    CHECK(values(t) == values(it->second));  // the running statistics moved alike
  }

  // A checkpoint of the flattened form loads into the model and back.
  auto other = std::make_shared<Net>();
  nn::Sequential other_seq = flattened(*other);
  other_seq->load_state_dict(seq->state_dict());
  for (size_t i = 0; i < ours.size(); ++i) CHECK(values(other->named_parameters()[i].second) == values(ours[i].second));
}

TEST_CASE("Sequential refuses names that clash, nest under an entry or have empty parts", "[nn][sequential]") {
  nn::Sequential seq;
  seq->push_back("a", nn::Linear(2, 2));
  seq->push_back("group.x", nn::Linear(2, 2));
  seq->push_back(nn::ReLU());  // "2"
  CHECK_THAT(error_of([&] { seq->push_back("a", nn::ReLU()); }),
             Catch::Contains("entry 3 is named 'a', as entry 0 already is"));
  CHECK_THAT(error_of([&] { seq->push_back("group.x", nn::ReLU()); }), Catch::Contains("as entry 1 already is"));
  CHECK_THAT(error_of([&] { seq->push_back("2", nn::ReLU()); }), Catch::Contains("as entry 2 already is"));
  CHECK_THAT(error_of([&] { seq->push_back("a.b", nn::ReLU()); }), Catch::Contains("named 'a.b', but 'a' is an entry"));
  CHECK_THAT(error_of([&] { seq->push_back("group", nn::ReLU()); }),
             Catch::Contains("named 'group', but entries named 'group.*' exist already"));
  CHECK_THAT(error_of([&] { seq->push_back("x..y", nn::ReLU()); }), Catch::Contains("'x..y' has an empty part"));
  CHECK_THAT(error_of([&] { seq->push_back("y.", nn::ReLU()); }), Catch::Contains("'y.' has an empty part"));
  CHECK_THAT(error_of([&] { seq->push_back("", nn::ReLU()); }), Catch::Contains("'' has an empty part"));
  CHECK_THAT(error_of([&] { seq->push_back("z", std::shared_ptr<nn::Module>()); }),
             Catch::Contains("entry 3 ('z') is null"));
  CHECK_THAT(error_of([&] { seq->push_back(".w", nn::ReLU()); }), Catch::Contains("'.w' has an empty part"));
  // The failed calls added nothing (no group either); an unnamed entry is named by its index.
  REQUIRE(seq->size() == 3);
  CHECK(seq->named_children().size() == 3);
  seq->push_back(nn::Tanh());
  CHECK(seq->name(3) == "3");
  seq->push_back("x", nn::ReLU());
  seq->push_back("y.z", nn::ReLU());
  seq->push_back("w", nn::ReLU());
  CHECK(seq->size() == 7);
}

TEST_CASE("clone() of a Sequential keeps its names and values, and trains apart", "[nn][sequential]") {
  manual_seed(9);
  auto net = std::make_shared<Net>();
  nn::Sequential seq = flattened(*net);
  seq->push_back(nn::ReLU());
  auto copy = std::dynamic_pointer_cast<nn::SequentialImpl>(seq->clone());
  REQUIRE(copy != nullptr);
  REQUIRE(copy->size() == seq->size());
  for (size_t i = 0; i < seq->size(); ++i) {
    CHECK(copy->name(i) == seq->name(i));
    CHECK((*copy)[i] != (*seq)[i]);
    CHECK((*copy)[i]->type_name() == (*seq)[i]->type_name());
  }
  CHECK(keys_of(copy->state_dict()) == keys_of(seq->state_dict()));
  CHECK(copy->repr() == seq->repr());
  // Its entries are its registered children: an optimizer over its parameters moves its forward.
  auto before = seq->state_dict();
  Tensor x = randn({2, 3, 5, 5});
  optim::SGD sgd(copy->parameters(), optim::SGDOptions(0.5));
  copy->forward(x).square().sum().backward();
  sgd.step();
  for (size_t i = 0; i < before.size(); ++i) CHECK(values(seq->state_dict()[i].second) == values(before[i].second));
  CHECK(values(copy->forward(x)) != values(seq->forward(x)));
  // A second clone of the clone still works (its group is its own, not the original's).
  auto again = std::dynamic_pointer_cast<nn::SequentialImpl>(copy->clone());
  REQUIRE(again != nullptr);
  CHECK(keys_of(again->state_dict()) == keys_of(seq->state_dict()));
  CHECK(values(again->forward(x)) == values(copy->forward(x)));
}

TEST_CASE("a BatchNorm entry followed by a ReLU runs fused, with the two ops' results", "[nn][sequential]") {
  manual_seed(11);
  for (bool two_d : {true, false}) {
    INFO((two_d ? "BatchNorm2d" : "BatchNorm1d"));
    std::shared_ptr<nn::Module> bn = two_d ? std::static_pointer_cast<nn::Module>(nn::BatchNorm2d(6).ptr())
                                           : std::static_pointer_cast<nn::Module>(nn::BatchNorm1d(6).ptr());
    std::shared_ptr<nn::Module> reference = bn->clone();
    nn::Sequential seq(bn, nn::ReLU());
    Tensor x = two_d ? randn({3, 6, 5, 4}) : randn({7, 6});
    Tensor a = x.detach().requires_grad_(true), b = x.detach().requires_grad_(true);
    Tensor y = seq(a), expected = reference->forward(b).relu();
    REQUIRE(y.grad_fn() != nullptr);
    CHECK(y.grad_fn()->name() == "BatchNormReluBackward0");
    CHECK(values(y) == values(expected));
    Tensor g = randn(y.sizes());
    y.backward(g);
    expected.backward(g);
    CHECK(values(a.grad()) == values(b.grad()));
    CHECK(values(bn->find_parameter("weight")->grad()) == values(reference->find_parameter("weight")->grad()));
    CHECK(values(bn->find_parameter("bias")->grad()) == values(reference->find_parameter("bias")->grad()));
    // The running statistics moved once.
    CHECK(bn->find_buffer("num_batches_tracked")->item<int64_t>() == 1);
    CHECK(values(*bn->find_buffer("running_var")) == values(*reference->find_buffer("running_var")));
    // In evaluation too.
    seq->eval();
    reference->eval();
    NoGradGuard no_grad;
    CHECK(values(seq(x)) == values(reference->forward(x).relu()));
  }
  // Not fused: a ReLU that does not directly follow the BatchNorm.
  nn::Sequential apart(nn::BatchNorm2d(2), nn::Identity(), nn::ReLU());
  Tensor y = apart(randn({2, 2, 3, 3}, TensorOptions().requires_grad(true)));
  CHECK(y.grad_fn()->name() != "BatchNormReluBackward0");
}
