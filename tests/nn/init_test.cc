// nn::init against torch.nn.init's formulas: gains, fans, the kaiming and xavier bounds and
// standard deviations (checked statistically), the plain fills, and seeding.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/ember_core.h"
#include "nn/init.h"
#include "tests/autograd/test_util.h"
#include "tests/nn/layer_zoo.h"

using namespace ember;
using namespace ember::testing;
namespace init = ember::nn::init;

namespace {

json::Value uniform_spec(double bound) {
  return json::Value::object({{"dist", json::Value::string("uniform")},
                              {"low", json::Value::number(-bound)},
                              {"high", json::Value::number(bound)}});
}

json::Value normal_spec(double mean, double std) {
  return json::Value::object({{"dist", json::Value::string("normal")},
                              {"mean", json::Value::number(mean)},
                              {"std", json::Value::number(std)}});
}

// A conv weight [out 64, in 32, 3, 3]: fan_in 288, fan_out 576, so the modes differ by sqrt(2).
constexpr double kFanIn = 288, kFanOut = 576;
Tensor conv_weight() { return empty({64, 32, 3, 3}); }

}  // namespace

TEST_CASE("calculate_gain and calculate_fan_in_and_fan_out", "[nn][init]") {
  using init::Nonlinearity;
  CHECK(init::calculate_gain(Nonlinearity::Linear) == 1.0);
  CHECK(init::calculate_gain(Nonlinearity::Conv) == 1.0);
  CHECK(init::calculate_gain(Nonlinearity::Sigmoid) == 1.0);
  CHECK(init::calculate_gain(Nonlinearity::Tanh) == Approx(5.0 / 3.0));
  CHECK(init::calculate_gain(Nonlinearity::ReLU) == Approx(std::sqrt(2.0)));
  CHECK(init::calculate_gain(Nonlinearity::LeakyReLU) == Approx(std::sqrt(2.0 / (1 + 0.01 * 0.01))));
  CHECK(init::calculate_gain(Nonlinearity::LeakyReLU, 0.2) == Approx(std::sqrt(2.0 / 1.04)));
  CHECK(init::calculate_fan_in_and_fan_out(conv_weight()) == std::pair<int64_t, int64_t>{288, 576});
  CHECK(init::calculate_fan_in_and_fan_out(empty({5, 7})) == std::pair<int64_t, int64_t>{7, 5});
  CHECK_THAT(error_of([] { init::calculate_fan_in_and_fan_out(empty({5})); }), Catch::Contains("fewer than 2"));
  Tensor vector = empty({5});
  CHECK_THAT(error_of([&] { init::kaiming_uniform_(vector); }), Catch::Contains("fewer than 2"));
}

TEST_CASE("kaiming_uniform_ and kaiming_normal_: fan modes and gains", "[nn][init]") {
  using init::FanMode;
  using init::Nonlinearity;
  manual_seed(3);
  Tensor w = conv_weight();
  init::kaiming_uniform_(w, 0.0, FanMode::FanIn, Nonlinearity::ReLU);
  CHECK(check_distribution(w, uniform_spec(std::sqrt(2.0) * std::sqrt(3.0 / kFanIn))) == "");
  init::kaiming_uniform_(w, 0.0, FanMode::FanOut, Nonlinearity::ReLU);
  CHECK(check_distribution(w, uniform_spec(std::sqrt(2.0) * std::sqrt(3.0 / kFanOut))) == "");
  init::kaiming_uniform_(w, 0.2, FanMode::FanIn, Nonlinearity::LeakyReLU);
  CHECK(check_distribution(w, uniform_spec(std::sqrt(2.0 / 1.04) * std::sqrt(3.0 / kFanIn))) == "");
  init::kaiming_uniform_(w);  // defaults: a = 0, fan_in, leaky_relu: the ReLU gain
  CHECK(check_distribution(w, uniform_spec(std::sqrt(6.0 / kFanIn))) == "");

  init::kaiming_normal_(w, 0.0, FanMode::FanIn, Nonlinearity::ReLU);
  CHECK(check_distribution(w, normal_spec(0.0, std::sqrt(2.0 / kFanIn))) == "");
  init::kaiming_normal_(w, 0.0, FanMode::FanOut, Nonlinearity::ReLU);
  CHECK(check_distribution(w, normal_spec(0.0, std::sqrt(2.0 / kFanOut))) == "");
  CHECK(check_distribution(w, normal_spec(0.0, std::sqrt(2.0 / kFanIn))) != "");  // the modes are told apart
  init::kaiming_normal_(w, 0.5, FanMode::FanOut, Nonlinearity::LeakyReLU);
  CHECK(check_distribution(w, normal_spec(0.0, std::sqrt(2.0 / 1.25) / std::sqrt(kFanOut))) == "");
  init::kaiming_normal_(w, 0.0, FanMode::FanIn, Nonlinearity::Tanh);
  CHECK(check_distribution(w, normal_spec(0.0, 5.0 / 3.0 / std::sqrt(kFanIn))) == "");
}

TEST_CASE("xavier_uniform_ and xavier_normal_", "[nn][init]") {
  manual_seed(4);
  Tensor w = conv_weight();
  init::xavier_uniform_(w);
  CHECK(check_distribution(w, uniform_spec(std::sqrt(6.0 / (kFanIn + kFanOut)))) == "");
  init::xavier_uniform_(w, 5.0 / 3.0);
  CHECK(check_distribution(w, uniform_spec(5.0 / 3.0 * std::sqrt(6.0 / (kFanIn + kFanOut)))) == "");
  init::xavier_normal_(w);
  CHECK(check_distribution(w, normal_spec(0.0, std::sqrt(2.0 / (kFanIn + kFanOut)))) == "");
  init::xavier_normal_(w, 2.0);
  CHECK(check_distribution(w, normal_spec(0.0, 2.0 * std::sqrt(2.0 / (kFanIn + kFanOut)))) == "");
  CHECK(check_distribution(w, uniform_spec(2.0 * std::sqrt(6.0 / (kFanIn + kFanOut)))) != "");  // the family
}

TEST_CASE("normal_, uniform_, zeros_, ones_ and constant_", "[nn][init]") {
  manual_seed(5);
  Tensor w = empty({128, 128});
  init::normal_(w, 2.0, 0.5);
  CHECK(check_distribution(w, normal_spec(2.0, 0.5)) == "");
  init::uniform_(w, -3.0, 1.0);
  json::Value spec = uniform_spec(2.0);
  spec.set("low", json::Value::number(-3.0));
  spec.set("high", json::Value::number(1.0));
  CHECK(check_distribution(w, spec) == "");
  init::uniform_(w);  // [0, 1)
  CHECK(w.min().item<double>() >= 0.0);
  CHECK(w.max().item<double>() < 1.0);
  init::zeros_(w);
  CHECK(w.abs().max().item<double>() == 0.0);
  init::ones_(w);
  CHECK(w.min().item<double>() == 1.0);
  CHECK(w.max().item<double>() == 1.0);
  init::constant_(w, 0.25);
  CHECK(w.min().item<double>() == 0.25);
  CHECK(w.max().item<double>() == 0.25);
  CHECK_THAT(error_of([&] { init::uniform_(w, 1.0, -1.0); }), Catch::Contains("low <= high"));
  CHECK_THAT(error_of([&] { init::normal_(w, 0.0, -1.0); }), Catch::Contains("std >= 0"));
}

TEST_CASE("initialisers on a parameter: in place, unrecorded, any dtype and layout", "[nn][init]") {
  Tensor p = empty({16, 8}).requires_grad_(true);
  Tensor handle = p;
  init::kaiming_uniform_(p);
  CHECK(p.is_leaf());
  CHECK(p.requires_grad());
  CHECK(handle.impl_ptr() == p.impl_ptr());
  Tensor q = empty({16, 8}, TensorOptions(kFloat64));
  init::xavier_normal_(q);
  CHECK(q.dtype() == kFloat64);
  // A transposed view receives the same logical values as a contiguous tensor of its shape.
  Generator a(11), b(11);
  Tensor base = empty({8, 16});
  Tensor view = base.t();
  init::uniform_(view, -1.0, 1.0, &a);
  Tensor dense = empty({16, 8});
  init::uniform_(dense, -1.0, 1.0, &b);
  CHECK(view.contiguous().to_vector<float>() == dense.to_vector<float>());
}

TEST_CASE("initialisers are seeded: same seed, same values", "[nn][init]") {
  auto draw = [](uint64_t seed) {
    Generator generator(seed);
    Tensor w = empty({32, 16});
    init::kaiming_normal_(w, 0.0, init::FanMode::FanIn, init::Nonlinearity::ReLU, &generator);
    init::xavier_uniform_(w, 1.0, &generator);  // a second fill continues the generator's stream
    return w.to_vector<float>();
  };
  CHECK(draw(7) == draw(7));
  CHECK(draw(7) != draw(8));
  auto global = [] {
    manual_seed(9);
    Tensor w = empty({32, 16});
    init::normal_(w);
    return w.to_vector<float>();
  };
  CHECK(global() == global());
  // Layers draw from the global generator: manual_seed makes them reproducible.
  manual_seed(10);
  std::vector<float> first = nn::Linear(8, 4)->weight.to_vector<float>();
  manual_seed(10);
  CHECK(nn::Linear(8, 4)->weight.to_vector<float>() == first);
}
