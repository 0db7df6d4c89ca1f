// amp::GradScaler against PyTorch's torch.amp.GradScaler: the golden scripts of
// tests/nn/grad_scaler_golden.json (tools/golden/make_grad_scaler_golden.py) give the same scale
// (bit for bit), skipped steps and growth tracker after every update(), and the same final
// weights; a resume mid growth-interval (state_dict, or a checkpoint) continues the same sequence;
// unscale_ hands clip_grad_norm_ the true gradients; and every misuse raises naming the call.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "core/amp_unscale.h"
#include "core/backend.h"
#include "core/ember_core.h"
#include "core/io/file_io.h"
#include "core/io/json.h"
#include "nn/amp/grad_scaler.h"
#include "nn/checkpoint.h"
#include "nn/nn.h"
#include "nn/optim/clip_grad.h"
#include "nn/optim/sgd.h"

using namespace ember;
using amp::GradScaler;
using amp::GradScalerOptions;

namespace {

const json::Value& golden() {
  static const json::Value value = [] {
    const char* path = "tests/nn/grad_scaler_golden.json";
    std::vector<uint8_t> bytes = read_file(path);
    return json::parse(std::string(bytes.begin(), bytes.end()), path);
  }();
  return value;
}

const json::Value& scenario(const std::string& name) {
  for (const json::Value& s : golden().find("scenarios")->items())
    if (s.find("name")->as_string() == name) return s;
  FAIL("no golden scenario " << name);
  throw std::logic_error("unreachable");
}

double number_or(const json::Value& object, const char* key, double fallback) {
  const json::Value* v = object.find(key);
  return v ? v->as_double() : fallback;
}

// The script's model: Linear(4, 5), ReLU, Linear(5, 2), each weight element from the script's
// closed form (exact in float32).
std::shared_ptr<nn::Module> make_model() {
  auto model = nn::Sequential(nn::Linear(4, 5), nn::ReLU(), nn::Linear(5, 2)).ptr();
  NoGradGuard no_grad;
  int64_t p = 0;
  for (Tensor& param : model->parameters()) {
    std::vector<float> values(static_cast<size_t>(param.numel()));
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<float>((static_cast<int64_t>(i) * 7 + p * 3) % 13 - 6) / 8.0f;
    param.copy_(tensor(values, param.sizes()));
    ++p;
  }
  return model;
}

Tensor batch_loss(nn::Module& model, int64_t step) {
  std::vector<float> x(12), y(6);
  for (int64_t k = 0; k < 12; ++k) x[k] = static_cast<float>((step * 11 + k * 5) % 9 - 4) / 4.0f;
  for (int64_t k = 0; k < 6; ++k) y[k] = static_cast<float>((step * 3 + k) % 5 - 2) / 2.0f;
  Tensor diff = model.forward(tensor(x, {3, 4})) - tensor(y, {3, 2});
  return (diff * diff).mean();
}

GradScalerOptions options_of(const json::Value& options) {
  GradScalerOptions o;
  if (const json::Value* v = options.find("init_scale")) o.init_scale(v->as_double());
  if (const json::Value* v = options.find("growth_factor")) o.growth_factor(v->as_double());
  if (const json::Value* v = options.find("backoff_factor")) o.backoff_factor(v->as_double());
  if (const json::Value* v = options.find("growth_interval")) o.growth_interval(v->as_int());
  return o;
}

// Element `index` of t in row-major order, as a view (grads may be transposed: Linear's are).
Tensor element(Tensor t, int64_t index) {
  while (t.dim() > 0) {
    const int64_t inner = t.numel() / t.size(0);
    t = t.select(0, index / inner);
    index %= inner;
  }
  return t;
}

struct Record {
  float scale;
  bool skipped;
  int64_t growth_tracker;
};

// One run of a golden scenario's steps [first, last) on `model`, `optimizer` and `scaler`.
std::vector<Record> run_steps(const json::Value& s, nn::Module& model, optim::Optimizer& optimizer, GradScaler& scaler,
                              int64_t first, int64_t last) {
  std::vector<Record> records;
  const json::Value& injections = *s.find("inject");
  for (int64_t step = first; step < last; ++step) {
    const json::Value* injection = injections.find(std::to_string(step));
    const std::string kind = injection ? injection->find("kind")->as_string() : "";
    optimizer.zero_grad();
    Tensor loss = batch_loss(model, step) * number_or(s, "loss_factor", 1.0);
    if (kind == "overflow") loss = loss * 3e38;
    scaler.scale(loss).backward();
    if (!kind.empty() && kind != "overflow") {
      const double value = kind == "nan"    ? std::numeric_limits<double>::quiet_NaN()
                           : kind == "-inf" ? -std::numeric_limits<double>::infinity()
                                            : std::numeric_limits<double>::infinity();
      NoGradGuard no_grad;
      element(model.parameters()[injection->find("param")->as_int()].grad(), injection->find("index")->as_int())
          .fill_(value);
    }
    if (const json::Value* max_norm = s.find("unscale_and_clip")) {
      scaler.unscale_(optimizer);
      optim::clip_grad_norm_(optimizer.parameters(), max_norm->as_double());
    }
    const bool stepped = scaler.step(optimizer);
    const json::Value* new_scale = s.find("new_scale") ? s.find("new_scale")->find(std::to_string(step)) : nullptr;
    if (new_scale)
      scaler.update(static_cast<float>(new_scale->as_double()));
    else
      scaler.update();
    records.push_back({scaler.get_scale(), !stepped, scaler.growth_tracker()});
  }
  return records;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

void require_golden_records(const json::Value& s, const std::vector<Record>& records, int64_t first) {
  const std::vector<json::Value>& expected = s.find("records")->items();
  for (size_t i = 0; i < records.size(); ++i) {
    const json::Value& e = expected[first + i];
    const float scale = static_cast<float>(e.find("scale")->as_double());
    INFO("step " << first + i << ": scale " << records[i].scale << " vs PyTorch's " << scale);
    REQUIRE(same_bits(records[i].scale, scale));
    REQUIRE(records[i].skipped == e.find("skipped")->as_bool());
    REQUIRE(records[i].growth_tracker == e.find("growth_tracker")->as_int());
  }
}

// float32 forward and backward round differently from PyTorch's; a skipped or taken step more
// or fewer would differ by far more.
void require_golden_params(const json::Value& s, nn::Module& model) {
  const std::vector<json::Value>& expected = s.find("final_params")->items();
  std::vector<Tensor> params = model.parameters();
  REQUIRE(params.size() == expected.size());
  for (size_t p = 0; p < params.size(); ++p) {
    std::vector<float> got = params[p].to_vector<float>();
    REQUIRE(got.size() == expected[p].items().size());
    for (size_t i = 0; i < got.size(); ++i) {
      const double want = expected[p].items()[i].as_double();
      INFO("parameter " << p << " element " << i);
      REQUIRE(std::abs(got[i] - want) <= 1e-5 * (1 + std::abs(want)));
    }
  }
}

optim::SGD make_sgd(const json::Value& s, nn::Module& model) {
  const json::Value& sgd = *s.find("sgd");
  return optim::SGD(model.parameters(),
                    optim::SGDOptions(sgd.find("lr")->as_double()).momentum(number_or(sgd, "momentum", 0)));
}

GradScaler make_scaler(const json::Value& s) {
  GradScaler scaler(options_of(*s.find("options")));
  if (const json::Value* saved = s.find("load_state")) scaler.load_state_dict({{}, *saved});
  return scaler;
}

}  // namespace

TEST_CASE("GradScaler gives PyTorch's scales, skipped steps and growth tracker on the golden scripts", "[amp]") {
  INFO("golden data from PyTorch " << golden().find("torch_version")->as_string());
  for (const json::Value& s : golden().find("scenarios")->items()) {
    INFO("scenario " << s.find("name")->as_string());
    auto model = make_model();
    optim::SGD optimizer = make_sgd(s, *model);
    GradScaler scaler = make_scaler(s);
    const int64_t steps = s.find("steps")->as_int();
    require_golden_records(s, run_steps(s, *model, optimizer, scaler, 0, steps), 0);
    require_golden_params(s, *model);
    const json::Value& saved = *s.find("state_dict");
    REQUIRE(scaler.state_dict().json.dump() ==
            json::Value::object({{"scale", *saved.find("scale")},
                                 {"growth_factor", *saved.find("growth_factor")},
                                 {"backoff_factor", *saved.find("backoff_factor")},
                                 {"growth_interval", *saved.find("growth_interval")},
                                 {"_growth_tracker", *saved.find("_growth_tracker")}})
                .dump());
  }
}

TEST_CASE("a GradScaler resumed mid growth interval continues the same sequence bit for bit", "[amp][resume]") {
  const json::Value& s = scenario("growth_interval_3");
  const int64_t steps = s.find("steps")->as_int(), cut = 8;
  REQUIRE(s.find("records")->items()[cut - 1].find("growth_tracker")->as_int() == 1);  // mid interval

  auto uninterrupted = make_model();
  optim::SGD uninterrupted_sgd = make_sgd(s, *uninterrupted);
  GradScaler uninterrupted_scaler = make_scaler(s);
  run_steps(s, *uninterrupted, uninterrupted_sgd, uninterrupted_scaler, 0, steps);

  SECTION("state_dict through its serialized bytes, into a scaler made with other options") {
    auto model = make_model();
    optim::SGD optimizer = make_sgd(s, *model);
    GradScaler scaler = make_scaler(s);
    run_steps(s, *model, optimizer, scaler, 0, cut);
    std::vector<uint8_t> bytes = optim::serialize_state_dict(scaler.state_dict());
    GradScaler resumed(GradScalerOptions().init_scale(8.0).growth_interval(1000));
    resumed.load_state_dict(optim::parse_state_dict(bytes.data(), bytes.size(), "scaler"));
    REQUIRE(resumed.get_scale() == scaler.get_scale());
    REQUIRE(resumed.growth_tracker() == 1);
    require_golden_records(s, run_steps(s, *model, optimizer, resumed, cut, steps), cut);
    for (size_t p = 0; p < model->parameters().size(); ++p)
      REQUIRE(model->parameters()[p].to_vector<float>() == uninterrupted->parameters()[p].to_vector<float>());
  }
  SECTION("a training checkpoint with model, optimizer and scaler") {
    auto model = make_model();
    optim::SGD optimizer = make_sgd(s, *model);
    GradScaler scaler = make_scaler(s);
    run_steps(s, *model, optimizer, scaler, 0, cut);
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string path = std::string(tmp ? tmp : "/tmp") + "/grad_scaler_checkpoint.safetensors";
    nn::TrainingState state;
    state.step = cut;
    nn::save_checkpoint(path, *model, &optimizer, nullptr, state, nullptr, &scaler);

    auto resumed_model = make_model();
    optim::SGD resumed_optimizer = make_sgd(s, *resumed_model);
    GradScaler resumed;
    REQUIRE(nn::load_checkpoint(path, *resumed_model, &resumed_optimizer, nullptr, nullptr, &resumed).step == cut);
    require_golden_records(s, run_steps(s, *resumed_model, resumed_optimizer, resumed, cut, steps), cut);
    for (size_t p = 0; p < resumed_model->parameters().size(); ++p)
      REQUIRE(resumed_model->parameters()[p].to_vector<float>() == uninterrupted->parameters()[p].to_vector<float>());

    // A checkpoint saved without a scaler cannot restore one.
    nn::save_checkpoint(path, *model, &optimizer, nullptr, state, nullptr);
    REQUIRE_THROWS_WITH(nn::load_checkpoint(path, *resumed_model, &resumed_optimizer, nullptr, nullptr, &resumed),
                        Catch::Contains("holds no gradient-scaler state"));
  }
}

TEST_CASE("unscale_ hands clip_grad_norm_ the true gradients", "[amp][clip]") {
  // The reference: the same loss, unscaled. The scale is a power of two, so unscaling is exact.
  auto reference = make_model();
  batch_loss(*reference, 3).backward();
  std::vector<Tensor> reference_params = reference->parameters();
  const double true_norm = optim::clip_grad_norm_(reference_params, 1e9);

  auto model = make_model();
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1));
  GradScaler scaler;
  scaler.scale(batch_loss(*model, 3)).backward();
  REQUIRE(model->parameters()[0].grad().abs().amax().item<double>() >
          1000 * reference_params[0].grad().abs().amax().item<double>());
  scaler.unscale_(optimizer);
  for (size_t p = 0; p < reference_params.size(); ++p)
    REQUIRE(model->parameters()[p].grad().to_vector<float>() == reference_params[p].grad().to_vector<float>());
  REQUIRE(optim::clip_grad_norm_(optimizer.parameters(), 1e9) == true_norm);
  REQUIRE(scaler.step(optimizer));  // no second unscale: the step uses the clipped, true grads
  scaler.update();
}

TEST_CASE("each optimizer steps on its own gradients' check; update backs off if any was skipped", "[amp]") {
  auto model = make_model();
  std::vector<Tensor> params = model->parameters();
  optim::SGD first({params[0], params[1]}, optim::SGDOptions(0.1)),
      second({params[2], params[3]}, optim::SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().growth_interval(1));
  scaler.scale(batch_loss(*model, 0)).backward();
  {
    NoGradGuard no_grad;
    element(params[3].grad(), 1).fill_(std::numeric_limits<double>::infinity());
  }
  std::vector<float> before = params[0].to_vector<float>(), before_second = params[2].to_vector<float>();
  REQUIRE(scaler.step(first));
  REQUIRE_FALSE(scaler.step(second));
  REQUIRE(params[0].to_vector<float>() != before);
  REQUIRE(params[2].to_vector<float>() == before_second);
  scaler.update();
  REQUIRE(scaler.get_scale() == 32768.0f);
  REQUIRE(scaler.growth_tracker() == 0);
}

TEST_CASE("gradient accumulation: every micro-batch's loss scaled, one unscale at the step", "[amp]") {
  auto reference = make_model(), model = make_model();
  optim::SGD reference_sgd(reference->parameters(), optim::SGDOptions(0.1));
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1));
  GradScaler scaler;
  for (int64_t micro = 0; micro < 3; ++micro) {
    (batch_loss(*reference, micro) * (1.0 / 3)).backward();
    scaler.scale(batch_loss(*model, micro) * (1.0 / 3)).backward();
  }
  reference_sgd.step();
  REQUIRE(scaler.step(optimizer));
  scaler.update();
  for (size_t p = 0; p < model->parameters().size(); ++p)
    REQUIRE(model->parameters()[p].to_vector<float>() == reference->parameters()[p].to_vector<float>());
}

TEST_CASE("GradScaler's misuses raise naming the call and what was expected", "[amp][errors]") {
  auto model = make_model();
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1));

  SECTION("factors") {
    REQUIRE_THROWS_WITH(GradScaler(GradScalerOptions().growth_factor(1.0)),
                        Catch::Contains("GradScaler: expected growth_factor > 1"));
    REQUIRE_THROWS_WITH(GradScaler(GradScalerOptions().backoff_factor(1.0)),
                        Catch::Contains("GradScaler: expected backoff_factor < 1"));
  }
  SECTION("unscale_, step or update before scale()") {
    GradScaler scaler;
    REQUIRE_THROWS_WITH(scaler.unscale_(optimizer), Catch::Contains("GradScaler::unscale_: the scale is not set yet"));
    REQUIRE_THROWS_WITH(scaler.step(optimizer), Catch::Contains("GradScaler::step: the scale is not set yet"));
    REQUIRE_THROWS_WITH(scaler.update(), Catch::Contains("GradScaler::update: the scale is not set yet"));
  }
  SECTION("calls out of order within one iteration") {
    GradScaler scaler;
    scaler.scale(batch_loss(*model, 0)).backward();
    scaler.unscale_(optimizer);
    REQUIRE_THROWS_WITH(
        scaler.unscale_(optimizer),
        Catch::Contains(
            "GradScaler::unscale_: unscale_() has already been called on this optimizer since the last update()"));
    REQUIRE(scaler.step(optimizer));
    REQUIRE_THROWS_WITH(scaler.step(optimizer),
                        Catch::Contains("GradScaler::step: step() has already been called since the last update()"));
    REQUIRE_THROWS_WITH(scaler.unscale_(optimizer),
                        Catch::Contains("GradScaler::unscale_: unscale_() is being called after step()"));
    scaler.update();
    REQUIRE_THROWS_WITH(scaler.update(), Catch::Contains("GradScaler::update: no inf checks were recorded"));
    scaler.unscale_(optimizer);  // a new iteration may start
  }
  SECTION("no gradients at all") {
    GradScaler scaler;
    scaler.scale(batch_loss(*model, 0));
    REQUIRE_THROWS_WITH(scaler.step(optimizer),
                        Catch::Contains("GradScaler::step: no inf checks were recorded for this optimizer"));
  }
  SECTION("a loss that is not floating-point") {
    GradScaler scaler;
    REQUIRE_THROWS_WITH(scaler.scale(tensor<int64_t>({3})),
                        Catch::Contains("GradScaler::scale: expected a floating-point loss, got int64"));
  }
  SECTION("float16 gradients, as PyTorch refuses them") {
    Tensor w = zeros({3}, kFloat16).requires_grad_();
    optim::SGD half_optimizer({w}, optim::SGDOptions(0.1));
    GradScaler scaler;
    scaler.scale(w.to(kFloat32).sum()).backward();
    REQUIRE(w.grad().dtype() == kFloat16);
    REQUIRE_THROWS_WITH(scaler.step(half_optimizer),
                        Catch::Contains("GradScaler::unscale_: parameter 0 of SGD has a float16 gradient; expected "
                                        "float32, float64 or bfloat16 gradients"));
  }
  SECTION("load_state_dict with missing, mistyped or empty state") {
    GradScaler scaler;
    json::Value saved = scaler.state_dict().json;
    json::Value missing = json::Value::object();
    for (const auto& [key, value] : saved.members())
      if (key != "_growth_tracker") missing.set(key, value);
    REQUIRE_THROWS_WITH(scaler.load_state_dict({{}, missing}),
                        Catch::Contains("GradScaler::load_state_dict: missing key \"_growth_tracker\""));
    json::Value mistyped = saved;
    mistyped.set("growth_interval", json::Value::number(2.5));
    REQUIRE_THROWS_WITH(scaler.load_state_dict({{}, mistyped}),
                        Catch::Contains("GradScaler::load_state_dict: expected \"growth_interval\" to be an integer"));
    json::Value negative = saved;
    negative.set("_growth_tracker", json::Value::integer(-1));
    REQUIRE_THROWS_WITH(scaler.load_state_dict({{}, negative}), Catch::Contains("\"_growth_tracker\" to be a count"));
    REQUIRE_THROWS_WITH(scaler.load_state_dict({}), Catch::Contains("the state dict is empty"));
    REQUIRE(scaler.get_scale() == 65536.0f);  // nothing changed
    GradScaler disabled(GradScalerOptions().enabled(false));
    REQUIRE(disabled.state_dict().json.members().empty());
  }
  SECTION("amp_unscale_: grads it cannot unscale") {
    const Tensor inv = full({}, 0.5f, kFloat32);
    REQUIRE_THROWS_WITH(amp_unscale_({zeros({4}), zeros({3}, kInt32)}, inv),
                        Catch::Contains("amp_unscale_: expected grad 1 to be float32, float64, bfloat16 or float16, "
                                        "got int32"));
    REQUIRE_THROWS_WITH(amp_unscale_({zeros({8}).slice(0, 0, 8, 2)}, inv),
                        Catch::Contains("amp_unscale_: expected grad 0 to be dense"));
    REQUIRE_THROWS_WITH(amp_unscale_({zeros({4})}, full({}, 0.5, kFloat64)),
                        Catch::Contains("amp_unscale_: expected inv_scale to be one float32 element, got float64"));
    REQUIRE_THROWS_WITH(amp_unscale_({Tensor()}, inv), Catch::Contains("amp_unscale_: grad 0 is undefined"));
  }
  SECTION("grads on a device whose backend has no amp_unscale kernel") {
    const KernelTable* cpu = find_kernels(kCPU);
    KernelTable partial = *cpu;
    partial.amp_unscale = KernelTable().amp_unscale;
    register_kernels(kCPU, &partial);
    struct Restore {
      const KernelTable* table;
      ~Restore() { register_kernels(kCPU, table); }
    } restore{cpu};
    GradScaler scaler;
    scaler.scale(batch_loss(*model, 0)).backward();
    REQUIRE_THROWS_WITH(scaler.step(optimizer),
                        Catch::Contains("amp_unscale: not implemented by the cpu backend for cpu and dtype float32"));
  }
}

TEST_CASE("a disabled GradScaler passes the loss through and always steps", "[amp]") {
  auto model = make_model();
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().enabled(false));
  Tensor loss = batch_loss(*model, 1);
  REQUIRE(scaler.scale(loss).is_same(loss));
  loss.backward();
  scaler.unscale_(optimizer);
  REQUIRE(scaler.step(optimizer));
  scaler.update();
  REQUIRE(scaler.get_scale() == 1.0f);
  scaler.load_state_dict({});  // a no-op, as in PyTorch
}
