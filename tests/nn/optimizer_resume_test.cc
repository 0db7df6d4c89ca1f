// Optimizer state_dict: a run of 2N steps and a run of N steps, saved to safetensors bytes, loaded
// into a freshly built optimizer and continued for N steps, end bit for bit identical (float32 and
// float64, SGD and AdamW). Also the layout of the saved state and the checks on loading it.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "core/ember_core.h"
#include "nn/optim/adam.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"

using namespace ember;
using namespace ember::optim;

namespace {

const std::vector<Shape> kShapes = {{5, 3}, {3}, {7}};

std::vector<Tensor> make_params(DType dtype) {
  std::vector<Tensor> params;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  for (const Shape& shape : kShapes) {
    std::vector<double> values(shape_numel(shape));
    for (double& v : values) v = normal(rng);
    params.push_back(tensor(values, shape).to(dtype).requires_grad_());
  }
  return params;
}

// The grads of step `step` depend only on the step, so both runs see the same ones. The last
// parameter has none for the first two steps (it is skipped, and its state starts late).
void set_grads(const std::vector<Tensor>& params, int step) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (i == 2 && step < 2) {
      params[i].set_grad(Tensor());
      continue;
    }
    std::mt19937_64 rng(1000 * step + i);
    std::normal_distribution<double> normal;
    std::vector<double> values(params[i].numel());
    for (double& v : values) v = normal(rng);
    params[i].set_grad(tensor(values, params[i].sizes()).to(params[i].dtype()));
  }
}

std::vector<Tensor> fresh_copies(const std::vector<Tensor>& params) {
  std::vector<Tensor> copies;
  for (const Tensor& p : params) copies.push_back(p.detach().clone().requires_grad_());
  return copies;
}

void require_bitwise_equal(const Tensor& a, const Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  REQUIRE(a.dtype() == b.dtype());
  Tensor ca = a.detach().contiguous(), cb = b.detach().contiguous();
  REQUIRE(std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0);
}

StateDict round_trip(const StateDict& state) {
  std::vector<uint8_t> bytes = serialize_state_dict(state);
  return parse_state_dict(bytes.data(), bytes.size(), "optimizer state");
}

// make(params) builds the optimizer under test.
template <typename Make>
void check_resume(DType dtype, const Make& make) {
  const int n = 4;
  std::vector<Tensor> straight = make_params(dtype);
  auto full = make(straight);
  for (int s = 0; s < 2 * n; ++s) {
    set_grads(straight, s);
    full->step();
  }

  std::vector<Tensor> first = make_params(dtype);
  auto before = make(first);
  for (int s = 0; s < n; ++s) {
    set_grads(first, s);
    before->step();
  }
  StateDict saved = round_trip(before->state_dict());

  std::vector<Tensor> resumed = fresh_copies(first);  // as if reloaded from a model checkpoint
  auto after = make(resumed);
  after->load_state_dict(saved);
  for (int s = n; s < 2 * n; ++s) {
    set_grads(resumed, s);
    after->step();
  }
  for (size_t i = 0; i < straight.size(); ++i) require_bitwise_equal(resumed[i], straight[i]);
}

std::unique_ptr<Optimizer> make_sgd(const std::vector<Tensor>& p) {
  return std::make_unique<SGD>(
      std::vector<ParamGroup>{ParamGroup({p[0], p[2]}), ParamGroup({p[1]}, SGDOptions(0.05).momentum(0.5))},
      SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(5e-4));
}

std::unique_ptr<Optimizer> make_adamw(const std::vector<Tensor>& p) {
  return std::make_unique<AdamW>(
      std::vector<ParamGroup>{ParamGroup({p[0], p[2]}),
                              ParamGroup({p[1]}, AdamWOptions(3e-3).weight_decay(0).amsgrad(true))},
      AdamWOptions(1e-2).betas({0.8, 0.99}));
}

}  // namespace

TEST_CASE("SGD resumed from its state_dict continues bit for bit", "[optim][resume]") {
  SECTION("float32") { check_resume(kFloat32, make_sgd); }
  SECTION("float64") { check_resume(kFloat64, make_sgd); }
}

TEST_CASE("AdamW resumed from its state_dict continues bit for bit", "[optim][resume]") {
  SECTION("float32") { check_resume(kFloat32, make_adamw); }
  SECTION("float64") { check_resume(kFloat64, make_adamw); }
}

TEST_CASE("Adam resumed from its state_dict continues bit for bit", "[optim][resume]") {
  check_resume(kFloat32, [](const std::vector<Tensor>& p) {
    return std::make_unique<Adam>(p, AdamOptions(1e-2).weight_decay(1e-3).amsgrad(true));
  });
}

TEST_CASE("state_dict numbers parameters across groups, as PyTorch does", "[optim][resume]") {
  std::vector<Tensor> p = make_params(kFloat32);
  auto sgd = make_sgd(p);
  set_grads(p, 0);  // p[2] has no grad yet: it has no state
  sgd->step();
  StateDict state = sgd->state_dict();

  std::vector<std::string> names;
  for (const auto& [name, t] : state.tensors) names.push_back(name);
  REQUIRE(names == std::vector<std::string>{"state.0.momentum_buffer", "state.0.step", "state.2.momentum_buffer",
                                            "state.2.step"});
  REQUIRE(state.tensors[1].second.dtype() == kInt64);
  REQUIRE(state.tensors[1].second.item<int64_t>() == 1);
  // Group 0 holds p[0], p[2] (indices 0, 1); group 1 holds p[1] (index 2).
  REQUIRE(state.json.dump() ==
          "{\"optimizer\":\"SGD\",\"param_groups\":["
          "{\"lr\":0.10000000000000001,\"momentum\":0.90000000000000002,\"dampening\":0,"
          "\"weight_decay\":0.00050000000000000001,\"nesterov\":true,\"maximize\":false,\"params\":[0,1]},"
          "{\"lr\":0.050000000000000003,\"momentum\":0.5,\"dampening\":0,\"weight_decay\":0,\"nesterov\":false,"
          "\"maximize\":false,\"params\":[2]}]}");

  // A snapshot: later steps do not change it.
  Tensor saved_buffer = state.tensors[0].second.clone();
  set_grads(p, 3);
  sgd->step();
  require_bitwise_equal(state.tensors[0].second, saved_buffer);
}

TEST_CASE("load_state_dict restores hyper-parameters and casts state to the parameter dtype", "[optim][resume]") {
  std::vector<Tensor> p32 = make_params(kFloat32);
  AdamW source(p32, AdamWOptions(0.02));
  set_grads(p32, 0);  // p32[2] gets no grad
  source.step();
  source.param_groups()[0].options().set_lr(0.005);

  std::vector<Tensor> p64 = make_params(kFloat64);
  AdamW target(p64, AdamWOptions(0.5));
  target.load_state_dict(round_trip(source.state_dict()));
  REQUIRE(target.param_groups()[0].options().get_lr() == 0.005);
  const ParamState* st = target.find_state(p64[0]);
  REQUIRE(st != nullptr);
  REQUIRE(st->step == 1);
  REQUIRE(st->tensors.at("exp_avg").dtype() == kFloat64);
  REQUIRE(target.find_state(p64[2]) == nullptr);  // it had no grad in that step
}

TEST_CASE("load_state_dict rejects a state that does not fit", "[optim][resume]") {
  std::vector<Tensor> p = make_params(kFloat32);
  auto sgd = make_sgd(p);
  set_grads(p, 3);
  sgd->step();
  StateDict good = sgd->state_dict();

  SECTION("another optimizer's state") {
    AdamW adamw(fresh_copies(p));
    REQUIRE_THROWS_WITH(adamw.load_state_dict(good), Catch::Contains("expected the state of a AdamW optimizer"));
  }
  SECTION("different group sizes") {
    std::vector<Tensor> q = fresh_copies(p);
    SGD other(q, SGDOptions(0.1));
    REQUIRE_THROWS_WITH(other.load_state_dict(good), Catch::Contains("expected 1 parameter groups"));
  }
  SECTION("a state tensor of the wrong shape") {
    StateDict bad = good;
    bad.tensors[0].second = zeros({2});
    REQUIRE_THROWS_WITH(sgd->load_state_dict(bad), Catch::Contains("of shape [5, 3] like its parameter"));
  }
  SECTION("an unknown state tensor") {
    StateDict bad = good;
    bad.tensors.emplace_back("state.1.exp_avg", zeros({3}));
    REQUIRE_THROWS_WITH(sgd->load_state_dict(bad), Catch::Contains("not a state tensor of SGD"));
  }
  SECTION("a parameter index out of range") {
    StateDict bad = good;
    bad.tensors.emplace_back("state.9.momentum_buffer", zeros({3}));
    REQUIRE_THROWS_WITH(sgd->load_state_dict(bad), Catch::Contains("the optimizer has 3"));
  }
  SECTION("a state without its step count") {
    StateDict bad = good;
    bad.tensors.erase(bad.tensors.begin() + 1);  // state.0.step
    REQUIRE_THROWS_WITH(sgd->load_state_dict(bad), Catch::Contains("has no \"state.0.step\" entry"));
  }
  SECTION("a malformed name") {
    StateDict bad = good;
    bad.tensors.emplace_back("momentum_buffer", zeros({3}));
    REQUIRE_THROWS_WITH(sgd->load_state_dict(bad), Catch::Contains("state.<index>.<name>"));
  }
  SECTION("a missing hyper-parameter, leaving the optimizer as it was") {
    StateDict bad = good;
    json::Value groups = json::Value::array();
    json::Value broken = json::Value::object();
    broken.set("lr", json::Value::number(7.0));
    broken.set("params", json::Value::array({json::Value::integer(0), json::Value::integer(1)}));
    groups.items().push_back(broken);
    groups.items().push_back(bad.json.find("param_groups")->items()[1]);
    bad.json.set("param_groups", groups);
    REQUIRE_THROWS_WITH(sgd->load_state_dict(bad), Catch::Contains("missing key \"momentum\""));
    REQUIRE(sgd->param_groups()[0].options().get_lr() == 0.1);
  }
}
