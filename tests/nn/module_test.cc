// The Module API: registration, traversal and hierarchical names, apply, train/eval propagation,
// to(dtype), zero_grad, and deep clone(), on the nested Net of tests/nn/test_nets.h.
#include <catch2/catch.hpp>

#include "core/ember_core.h"
#include "nn/nn.h"
#include "nn/optim/sgd.h"
#include "tests/autograd/test_util.h"
#include "tests/nn/test_nets.h"

using namespace ember;
using namespace ember::testing;

namespace {

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) out.push_back(name);
  return out;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

struct Holder : nn::Cloneable<Holder> {
  Holder() : Cloneable("Holder") { reset(); }
  void reset() override {
    weight = register_parameter("weight", ones({2}));
    frozen = register_parameter("frozen", ones({2}), /*requires_grad=*/false);
    stats = register_buffer("stats", zeros({2}));
    cache = register_buffer("cache", zeros({2}), /*persistent=*/false);
    inner = register_module("inner", nn::Linear(2, 2));
  }
  Tensor weight, frozen, stats, cache;
  nn::Linear inner{nullptr};
};

}  // namespace

TEST_CASE("register_parameter, register_buffer (persistent or not) and register_module", "[nn][module]") {
  auto m = std::make_shared<Holder>();
  CHECK(names_of(m->named_parameters()) == std::vector<std::string>{"weight", "frozen", "inner.weight", "inner.bias"});
  CHECK(names_of(m->named_parameters(/*recurse=*/false)) == std::vector<std::string>{"weight", "frozen"});
  CHECK(m->weight.requires_grad());
  CHECK(m->weight.is_leaf());
  CHECK_FALSE(m->frozen.requires_grad());
  // Non-persistent buffers are buffers, but not part of the state.
  CHECK(names_of(m->named_buffers()) == std::vector<std::string>{"stats", "cache"});
  CHECK(m->buffers().size() == 2);
  CHECK(names_of(m->state_dict()) ==
        std::vector<std::string>{"weight", "frozen", "stats", "inner.weight", "inner.bias"});
  CHECK(m->find_parameter("weight") != nullptr);
  CHECK(m->find_buffer("cache") != nullptr);
  CHECK(m->find_child("inner") == m->inner.ptr());

  CHECK_THAT(error_of([&] { m->register_parameter("weight", zeros({1})); }), Catch::Contains("already exists"));
  CHECK_THAT(error_of([&] { m->register_buffer("weight", zeros({1})); }), Catch::Contains("already a parameter"));
  CHECK_THAT(error_of([&] { m->register_parameter("a.b", zeros({1})); }), Catch::Contains("no '.'"));
  CHECK_THAT(error_of([&] { m->register_module("inner", nn::ReLU()); }), Catch::Contains("already exists"));
  // A parameter registered from a computed tensor is a leaf of its own.
  Tensor source = ones({2}, TensorOptions().requires_grad(true));
  Tensor& p = m->register_parameter("computed", source * 2);
  CHECK(p.is_leaf());
  CHECK(p.requires_grad());
}

TEST_CASE("hierarchical names, children, modules and apply", "[nn][module]") {
  auto net = std::make_shared<Net>();
  std::vector<std::string> params = names_of(net->named_parameters());
  CHECK(params.front() == "stem.weight");
  CHECK(contains(params, "layer1.0.conv1.weight"));
  CHECK(contains(params, "layer1.1.bn2.bias"));
  CHECK(params.back() == "fc.bias");
  CHECK(net->parameters().size() == params.size());
  std::vector<std::string> buffers = names_of(net->named_buffers());
  CHECK(buffers.size() == 2 + 4 * 3);
  CHECK(contains(buffers, "layer1.0.bn1.num_batches_tracked"));

  std::vector<std::string> children;
  for (const auto& [name, child] : net->named_children()) children.push_back(name + ":" + child->type_name());
  CHECK(children == std::vector<std::string>{"stem:Conv2d", "layer1:Sequential", "pool:AdaptiveAvgPool2d",
                                             "flatten:Flatten", "fc:Linear"});
  CHECK(net->children().size() == 5);

  std::vector<std::string> modules;
  for (const auto& [name, m] : net->named_modules()) modules.push_back(name);
  CHECK(modules == std::vector<std::string>{"", "stem", "layer1", "layer1.0", "layer1.0.conv1", "layer1.0.bn1",
                                            "layer1.0.conv2", "layer1.0.bn2", "layer1.1", "layer1.1.conv1",
                                            "layer1.1.bn1", "layer1.1.conv2", "layer1.1.bn2", "pool", "flatten", "fc"});
  CHECK(net->modules().size() == modules.size());
  CHECK(net->modules().front().get() == net.get());

  std::vector<std::string> visited;
  net->apply([&](nn::Module& m) { visited.push_back(m.type_name()); });
  CHECK(visited.size() == modules.size());
  CHECK(std::count(visited.begin(), visited.end(), "BatchNorm2d") == 4);
  // apply as an initialiser: every conv weight to zero.
  net->apply([](nn::Module& m) {
    if (auto* conv = dynamic_cast<nn::Conv2dImpl*>(&m)) nn::init::zeros_(conv->weight);
  });
  CHECK((*net->layer1)[1]->named_parameters().front().second.abs().max().item<double>() == 0.0);
  std::ostringstream printed;
  printed << *net;
  CHECK(printed.str() == net->repr());
}

TEST_CASE("train() and eval() reach every descendant", "[nn][module]") {
  auto net = std::make_shared<Net>();
  CHECK(net->is_training());
  net->eval();
  for (const auto& m : net->modules()) CHECK_FALSE(m->is_training());
  net->train();
  for (const auto& m : net->modules()) CHECK(m->is_training());
  net->layer1->eval();  // a subtree only
  for (const auto& [name, m] : net->named_modules()) CHECK(m->is_training() == (name.rfind("layer1", 0) != 0));
  // Evaluation mode changes the forward: batch norm uses running statistics.
  Tensor x = randn({2, 3, 6, 6});
  net->train();
  (void)net->forward(x);
  CHECK((*net->layer1)[0]->find_child("bn1")->find_buffer("num_batches_tracked")->item<int64_t>() == 1);
  net->eval();
  Tensor a = net->forward(x), b = net->forward(x);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  CHECK((*net->layer1)[0]->find_child("bn1")->find_buffer("num_batches_tracked")->item<int64_t>() == 1);
}

TEST_CASE("to(dtype) converts floating parameters, buffers and gradients in place", "[nn][module]") {
  auto net = std::make_shared<Net>();
  Tensor fc_weight = net->fc->weight;  // a handle taken before the conversion
  net->forward(randn({2, 3, 6, 6})).sum().backward();
  REQUIRE(fc_weight.grad().defined());
  std::vector<double> grad_before = fc_weight.grad().to_vector<double>();
  net->to(kFloat64);
  for (const auto& [name, p] : net->named_parameters()) {
    INFO(name);
    CHECK(p.dtype() == kFloat64);
    CHECK(p.is_leaf());
    CHECK(p.requires_grad());
    REQUIRE(p.grad().defined());  // PyTorch's Module.to converts .grad along with the parameter
    CHECK(p.grad().dtype() == kFloat64);
  }
  CHECK(fc_weight.grad().to_vector<double>() == grad_before);
  for (const auto& [name, b] : net->named_buffers()) {
    INFO(name);
    CHECK(b.dtype() == (name.find("num_batches_tracked") != std::string::npos ? kInt64 : kFloat64));
  }
  CHECK(fc_weight.dtype() == kFloat64);  // the same tensor, converted
  Tensor out = net->forward(randn({2, 3, 6, 6}).to(kFloat64));
  CHECK(out.dtype() == kFloat64);
  out.sum().backward();  // accumulates into the converted gradients
  CHECK(fc_weight.grad().dtype() == kFloat64);
  CHECK_THAT(error_of([&] { net->to(kInt64); }), Catch::Contains("floating"));
}

TEST_CASE("zero_grad sets gradients to none or to zeros in place", "[nn][module]") {
  nn::Linear linear(3, 2);
  linear(randn({4, 3})).sum().backward();
  Tensor grad = linear->weight.grad();
  REQUIRE(grad.defined());
  linear->zero_grad(/*set_to_none=*/false);
  CHECK(linear->weight.grad().defined());
  CHECK(linear->weight.grad().impl_ptr() == grad.impl_ptr());
  CHECK(grad.abs().max().item<double>() == 0.0);
  CHECK(linear->bias.grad().abs().max().item<double>() == 0.0);
  linear->zero_grad();  // set_to_none defaults to true, as in PyTorch 2
  CHECK_FALSE(linear->weight.grad().defined());
  CHECK_FALSE(linear->bias.grad().defined());
  linear(randn({4, 3})).sum().backward();
  CHECK(linear->weight.grad().defined());
}

TEST_CASE("clone() is deep: equal values, independent storage, independent training", "[nn][module]") {
  auto net = std::make_shared<Net>();
  net->forward(randn({4, 3, 6, 6}));  // running statistics away from their initial values
  net->eval();
  auto copy = std::dynamic_pointer_cast<Net>(net->clone());
  REQUIRE(copy != nullptr);
  CHECK(copy->repr() == net->repr());
  CHECK_FALSE(copy->is_training());
  CHECK_FALSE((*copy->layer1)[1]->is_training());
  auto original_state = net->state_dict(), copy_state = copy->state_dict();
  REQUIRE(names_of(copy_state) == names_of(original_state));
  for (size_t i = 0; i < original_state.size(); ++i) {
    INFO(original_state[i].first);
    CHECK(copy_state[i].second.to_vector<double>() == original_state[i].second.to_vector<double>());
    CHECK(copy_state[i].second.storage().get() != original_state[i].second.storage().get());
  }
  CHECK(names_of(copy->named_buffers()) == names_of(net->named_buffers()));  // "mask" stays non-persistent
  // The copy's fields are its registered parameters, and they are leaves of their own.
  CHECK(copy->fc->weight.impl_ptr() == copy->find_child("fc")->find_parameter("weight")->impl_ptr());
  CHECK(copy->fc->weight.is_leaf());
  CHECK(copy->fc->weight.requires_grad());

  // One SGD step on the copy leaves the original untouched, and vice versa.
  std::vector<double> before = net->fc->weight.to_vector<double>();
  copy->train();
  optim::SGD sgd(copy->parameters(), optim::SGDOptions(0.1));
  copy->forward(randn({2, 3, 6, 6})).square().sum().backward();
  sgd.step();
  CHECK(net->fc->weight.to_vector<double>() == before);
  CHECK_FALSE(net->fc->weight.grad().defined());
  CHECK(copy->fc->weight.to_vector<double>() != before);
  for (const Tensor& p : copy->parameters()) CHECK(p.grad().defined());
  CHECK((*net->layer1)[0]->find_child("bn1")->find_buffer("num_batches_tracked")->item<int64_t>() == 1);
  CHECK((*copy->layer1)[0]->find_child("bn1")->find_buffer("num_batches_tracked")->item<int64_t>() == 2);
}

TEST_CASE("clone() of containers clones their elements", "[nn][module]") {
  nn::ModuleDict dict;
  dict->insert("a", nn::Linear(2, 2));
  dict->insert("b", nn::Sequential(nn::Linear(2, 3), nn::ReLU()));
  auto copy = std::dynamic_pointer_cast<nn::ModuleDictImpl>(dict->clone());
  REQUIRE(copy != nullptr);
  CHECK(copy->keys() == dict->keys());
  CHECK(copy->at("a") != dict->at("a"));
  CHECK(copy->repr() == dict->repr());
  auto linear = std::dynamic_pointer_cast<nn::LinearImpl>(copy->at("a"));
  REQUIRE(linear != nullptr);
  CHECK(linear->weight.to_vector<float>() == dict->at("a")->find_parameter("weight")->to_vector<float>());
  CHECK(linear->weight.impl_ptr() == linear->find_parameter("weight")->impl_ptr());
}

TEST_CASE("a module shared by two parents is listed once, as in PyTorch", "[nn][module]") {
  // PyTorch: named_parameters / named_buffers / named_modules skip what they already yielded;
  // state_dict keeps every path.
  nn::Linear shared(2, 2);
  nn::BatchNorm1d norm(2);
  nn::Sequential model(shared, norm, nn::ReLU(), shared);
  CHECK(names_of(model->named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
  CHECK(names_of(model->named_buffers()) ==
        std::vector<std::string>{"1.running_mean", "1.running_var", "1.num_batches_tracked"});
  std::vector<std::string> modules;
  for (const auto& [name, m] : model->named_modules()) modules.push_back(name);
  CHECK(modules == std::vector<std::string>{"", "0", "1", "2"});
  CHECK(names_of(model->state_dict()) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias",
                                                                  "1.running_mean", "1.running_var",
                                                                  "1.num_batches_tracked", "3.weight", "3.bias"});
  // So an optimizer over model->parameters() accepts it and updates the shared weight once.
  optim::SGD sgd(model->parameters(), optim::SGDOptions(1.0));
  model(randn({4, 2})).sum().backward();
  std::vector<float> before = shared->weight.to_vector<float>(), grad = shared->weight.grad().to_vector<float>();
  sgd.step();
  std::vector<float> after = shared->weight.to_vector<float>();
  for (size_t i = 0; i < after.size(); ++i) CHECK(after[i] == Approx(before[i] - grad[i]));
}

TEST_CASE("pooling modules take a bare kernel size, as in PyTorch", "[nn][module]") {
  manual_seed(21);
  Tensor x = randn({2, 3, 7, 6});
  nn::MaxPool2d max(2), max_options(nn::MaxPool2dOptions(2));
  nn::MaxPool2d max_rect(Size2(3, 2));
  nn::AvgPool2d avg(3), avg_options(nn::AvgPool2dOptions(3));
  CHECK(max->options.kernel_size().h == 2);
  CHECK(max->options.kernel_size().w == 2);
  CHECK(max->forward(x).sizes() == Shape{2, 3, 3, 3});
  CHECK(max->forward(x).to_vector<float>() == max_options->forward(x).to_vector<float>());
  CHECK(max_rect->forward(x).sizes() == Shape{2, 3, 2, 3});
  CHECK(avg->forward(x).to_vector<float>() == avg_options->forward(x).to_vector<float>());
  CHECK(avg->forward(x).sizes() == Shape{2, 3, 2, 2});
}

TEST_CASE("forward hooks run around holder, call() and Sequential calls; not around forward(), not in clones",
          "[module][hooks]") {
  nn::Linear fc(3, 2);
  std::vector<std::string> log;
  size_t pre = fc->register_forward_pre_hook([&](nn::Module& m) { log.push_back("pre " + m.type_name()); });
  fc->register_forward_hook([&](nn::Module&, const std::vector<Tensor>& outputs) {
    REQUIRE(outputs.size() == 1);
    log.push_back("post " + shape_str(outputs[0].sizes()));
  });
  Tensor x = randn({4, 3});
  fc(x);
  REQUIRE(log == std::vector<std::string>{"pre Linear", "post [4, 2]"});
  fc->call(x);
  REQUIRE(log.size() == 4);
  fc->forward(x);  // a direct forward() call skips them, as in PyTorch
  REQUIRE(log.size() == 4);
  auto copy = fc->clone();
  copy->call(x);
  REQUIRE(log.size() == 4);
  fc->remove_forward_hook(pre);
  fc(x);
  REQUIRE(log.back() == "post [4, 2]");
  REQUIRE(log[log.size() - 2] == "post [4, 2]");
  // Sequential calls its children through call(), and does not fuse a hooked batch norm with the
  // ReLU after it.
  nn::Sequential seq(nn::BatchNorm2d(2), nn::ReLU());
  int calls = 0;
  (*seq)[0]->register_forward_pre_hook([&](nn::Module&) { ++calls; });
  (*seq)[1]->register_forward_hook([&](nn::Module&, const std::vector<Tensor>& outputs) {
    REQUIRE(outputs[0].min().item<double>() >= 0.0);
    ++calls;
  });
  seq(randn({3, 2, 4, 4}));
  REQUIRE(calls == 2);
}
