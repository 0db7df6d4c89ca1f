// Manual model placement: submodules moved with Module::to, activations with the differentiable
// Tensor::to. K training steps of a placed model (two Linears on cuda:0 and cuda:1; a conv net
// split CPU/cuda:0 and CPU/cuda:0/cuda:1) equal the same model on one device (cuda:0 in float32,
// or the CPU in float64); gradients and optimizer state stay on each parameter's device;
// checkpoints are device-free and load across placements; a forgotten `to` raises naming both
// devices. Needs three devices (EMBER_EMULATED_GPUS=3 in the BUILD file).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "cuda/conv.h"
#include "nn/checkpoint.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"
#include "tests/parallel/data_parallel_helpers.h"

using namespace ember;
using namespace ember::testing;
using Catch::Contains;

namespace {

const Device kCpu = Device(kCPU);
const Device kCuda1 = Device::cuda(1);
const Device kCuda2 = Device::cuda(2);

#if defined(__SANITIZE_ADDRESS__)
constexpr int kSteps = 2;
#else
constexpr int kSteps = 3;
#endif

void require_three_devices() {
  REQUIRE(cuda::device_count() >= 3);
  cuda::set_cudnn_allow_tf32(false);  // real GPUs: float32 convolutions, for the 1e-5 comparisons
}

// The seed example, as PyTorch's model-parallel tutorial writes it: fc1 on one device, fc2 on
// another, and the user's forward moving the activation between them.
struct SeedNet : nn::Cloneable<SeedNet> {
  static constexpr int64_t kIn = 13, kHidden = 17, kClasses = 5;
  SeedNet() : Cloneable("SeedNet") { reset(); }
  void reset() override {
    fc1 = register_module("fc1", nn::Linear(kIn, kHidden));
    fc2 = register_module("fc2", nn::Linear(kHidden, kClasses));
  }
  void place(Device a, Device b) {
    first = a;
    second = b;
    fc1->to(a);
    fc2->to(b);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = relu(fc1(x.to(first)));
    return fc2(forget_hop ? h : h.to(second));
  }
  nn::Linear fc1{nullptr}, fc2{nullptr};
  Device first = kCpu, second = kCpu;
  bool forget_hop = false;  // the mistake the error case makes
};

// A small conv net in three parts that can each live elsewhere: the stem (conv, batch norm, relu),
// the body (a strided conv, relu, global pooling) and the head (a Linear).
struct SplitNet : nn::Cloneable<SplitNet> {
  static constexpr int64_t kClasses = 4;
  SplitNet() : Cloneable("SplitNet") { reset(); }
  void reset() override {
    stem = register_module("stem", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 6, 3).padding(1).bias(false)),
                                                  nn::BatchNorm2d(6), nn::ReLU()));
    body = register_module("body", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(6, 8, 3).stride(2)), nn::ReLU()));
    head = register_module("head", nn::Linear(8, kClasses));
  }
  void place(Device s, Device b, Device h) {
    devices = {s, b, h};
    stem->to(s);
    body->to(b);
    head->to(h);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = stem(x.to(devices[0]));
    h = adaptive_avg_pool2d(body(h.to(devices[1])), 1).flatten(1);
    return head(h.to(devices[2]));
  }
  nn::Sequential stem{nullptr}, body{nullptr};
  nn::Linear head{nullptr};
  std::vector<Device> devices{kCpu, kCpu, kCpu};
};

enum class Opt { kSgd, kAdam };
enum class Reference { kCuda0Float32, kCpuFloat64 };

const char* reference_name(Reference r) {
  return r == Reference::kCuda0Float32 ? "reference: cuda:0, float32" : "reference: the CPU, float64";
}

std::unique_ptr<optim::Optimizer> make_optimizer(Opt kind, const std::vector<Tensor>& params) {
  if (kind == Opt::kSgd)
    return std::make_unique<optim::SGD>(params, optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-3));
  return std::make_unique<optim::Adam>(params, optim::AdamOptions(0.01).weight_decay(1e-3));
}

// A model being trained with its optimizer; `dtype` is what the inputs are cast to, and `clip`
// the largest gradient norm (0: no clipping).
struct Trainee {
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  DType dtype = kFloat32;
  double clip = 0.0;
  double last_norm = 0.0;

  // One step on (x, y), both given on the CPU; returns the loss.
  Tensor step(const Tensor& x, const Tensor& y) {
    optimizer->zero_grad();
    Tensor out = model->forward(x.to(dtype));
    Tensor loss = cross_entropy(out, y.to(out.device()));
    loss.backward();
    if (clip > 0) last_norm = optim::clip_grad_norm_(optimizer->parameters(), clip);
    optimizer->step();
    return loss.detach();
  }
};

struct Batch {
  Tensor x, y;
};

// Each parameter's optimizer state lives on that parameter's device and agrees with the reference's.
void check_same_optimizer_state(const Trainee& actual, const Trainee& expected, double tol) {
  const auto names = actual.model->named_parameters();
  const auto a = actual.optimizer->parameters(), e = expected.optimizer->parameters();
  REQUIRE(a.size() == names.size());
  REQUIRE(a.size() == e.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("optimizer state of " << names[i].first);
    const optim::ParamState* sa = actual.optimizer->find_state(a[i]);
    const optim::ParamState* se = expected.optimizer->find_state(e[i]);
    REQUIRE(sa != nullptr);
    REQUIRE(se != nullptr);
    CHECK(sa->step == se->step);
    REQUIRE(sa->tensors.size() == se->tensors.size());
    for (const auto& [name, t] : sa->tensors) {
      INFO(name);
      CHECK(t.device() == a[i].device());
      CHECK(t.dtype() == a[i].dtype());
      REQUIRE(se->tensors.count(name) == 1);
      check_close(name, t, se->tensors.at(name), tol);
    }
  }
}

// Parameters and buffers are where `expected` says, by name: placement survives training and loads.
void check_devices(const nn::Module& model, const std::vector<std::pair<std::string, Device>>& expected) {
  auto tensors = model.named_parameters();
  for (auto& b : model.named_buffers()) tensors.push_back(b);
  REQUIRE(tensors.size() == expected.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].first);
    REQUIRE(tensors[i].first == expected[i].first);
    CHECK(tensors[i].second.device() == expected[i].second);
    CHECK(tensors[i].second.is_leaf());
  }
}

std::vector<std::pair<std::string, Device>> devices_of(const nn::Module& model) {
  std::vector<std::pair<std::string, Device>> out;
  for (auto& [name, t] : model.named_parameters()) out.emplace_back(name, t.device());
  for (auto& [name, t] : model.named_buffers()) out.emplace_back(name, t.device());
  return out;
}

// Trains `placed` and `reference` on the same batches: every step's loss (and clipped norm), the
// last step's gradients, then parameters, buffers and optimizer state agree within `tol` of the
// reference's scale, and nothing left the device it was placed on.
void expect_trains_alike(Trainee& placed, Trainee& reference, const std::vector<Batch>& batches, double tol = 1e-5) {
  const auto placement = devices_of(*placed.model);
  for (size_t k = 0; k < batches.size(); ++k) {
    INFO("step " << k);
    const Tensor expected = reference.step(batches[k].x, batches[k].y);
    const Tensor actual = placed.step(batches[k].x, batches[k].y);
    check_close("loss", actual, expected, tol);
    if (placed.clip > 0) {
      CHECK(reference.last_norm > placed.clip);  // so that clipping did scale the gradients
      CHECK(std::abs(placed.last_norm - reference.last_norm) <= tol * reference.last_norm);
    }
  }
  check_same_grads(*placed.model, *reference.model, 10 * tol);
  check_same_state(*placed.model, *reference.model, tol);
  check_same_optimizer_state(placed, reference, tol);
  check_devices(*placed.model, placement);
}

// The reference twin of `model` (an unplaced model on the CPU): on cuda:0, or on the CPU in float64.
template <typename M>
std::shared_ptr<M> reference_twin(const std::shared_ptr<M>& model, Reference r) {
  auto copy = twin(model, r == Reference::kCuda0Float32 ? kCuda0 : kCpu);
  if (r == Reference::kCpuFloat64) copy->to(kFloat64);
  return copy;
}

std::vector<Batch> seed_batches(Generator& g, int count) {
  std::vector<Batch> out;
  for (int k = 0; k < count; ++k) {
    // Odd steps read a transposed (non-contiguous) input.
    Tensor x = k % 2 ? randn({SeedNet::kIn, 11}, {}, &g).t() : randn({11, SeedNet::kIn}, {}, &g);
    out.push_back({x, random_labels(g, 11, SeedNet::kClasses)});
  }
  return out;
}

// Contiguous, channels-last and spatially transposed images, in turn; all on the CPU.
std::vector<Batch> image_batches(Generator& g, int count, int64_t n = 7) {
  std::vector<Batch> out;
  for (int k = 0; k < count; ++k) {
    Tensor x;
    if (k % 3 == 0) x = randn({n, 3, 9, 11}, {}, &g);
    if (k % 3 == 1) x = random_images(g, n, 3, 9, 11);
    if (k % 3 == 2) x = randn({n, 3, 11, 9}, {}, &g).transpose(2, 3);
    out.push_back({x, random_labels(g, n, SplitNet::kClasses)});
  }
  return out;
}

std::string temp_path(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base ? base : "/tmp") + "/" + name;
}

}  // namespace

TEST_CASE("the seed example: fc1 on cuda:0, fc2 on cuda:1 trains like one device", "[placement][gpus:3]") {
  require_three_devices();
  const Opt kind = GENERATE(Opt::kSgd, Opt::kAdam);
  const Reference r = GENERATE(Reference::kCuda0Float32, Reference::kCpuFloat64);
  INFO((kind == Opt::kSgd ? "SGD, momentum" : "Adam") << "; " << reference_name(r));
  manual_seed(41);
  auto model = std::make_shared<SeedNet>();
  auto reference = reference_twin(model, r);
  reference->place(reference->fc1->weight.device(), reference->fc1->weight.device());
  auto placed = twin(model, kCpu);
  placed->place(kCuda0, kCuda1);
  REQUIRE(placed->fc1->weight.device() == kCuda0);
  REQUIRE(placed->fc2->bias.device() == kCuda1);

  Trainee p{placed, make_optimizer(kind, placed->parameters()), kFloat32, 0.25};
  Trainee e{reference, make_optimizer(kind, reference->parameters()), reference->fc1->weight.dtype(), 0.25};
  Generator g(42);
  expect_trains_alike(p, e, seed_batches(g, kSteps));
  CHECK(placed->fc1->weight.grad().device() == kCuda0);
  CHECK(placed->fc2->weight.grad().device() == kCuda1);
  const std::string state_name = kind == Opt::kSgd ? "momentum_buffer" : "exp_avg";
  CHECK(p.optimizer->find_state(placed->fc1->weight)->tensors.at(state_name).device() == kCuda0);
  CHECK(p.optimizer->find_state(placed->fc2->weight)->tensors.at(state_name).device() == kCuda1);
  // The output and the loss live where the last layer does.
  NoGradGuard no_grad;
  CHECK(placed->forward(seed_batches(g, 1)[0].x).device() == kCuda1);
}

TEST_CASE("a CPU + GPU split (stem on the CPU) and a CPU/cuda:0/cuda:1 split train like one device",
          "[placement][gpus:3]") {
  require_three_devices();
  const bool three_way = GENERATE(false, true);
  const Reference r = GENERATE(Reference::kCuda0Float32, Reference::kCpuFloat64);
  INFO((three_way ? "stem cpu, body cuda:0, head cuda:1" : "stem cpu, the rest cuda:0") << "; " << reference_name(r));
  manual_seed(43);
  auto model = std::make_shared<SplitNet>();
  auto reference = reference_twin(model, r);
  const Device one = reference->head->weight.device();
  reference->place(one, one, one);
  auto placed = twin(model, kCpu);
  placed->place(kCpu, kCuda0, three_way ? kCuda1 : kCuda0);

  // Clipping sums norms over CPU and GPU gradients.
  Trainee p{placed, make_optimizer(Opt::kSgd, placed->parameters()), kFloat32, 0.3};
  Trainee e{reference, make_optimizer(Opt::kSgd, reference->parameters()), reference->head->weight.dtype(), 0.3};
  Generator g(44);
  expect_trains_alike(p, e, image_batches(g, kSteps));
  CHECK(placed->stem->parameters()[0].grad().device() == kCpu);
  CHECK(placed->find_child("stem")->named_buffers()[0].second.device() == kCpu);  // running_mean
  CHECK(placed->head->weight.grad().device() == (three_way ? kCuda1 : kCuda0));

  // Evaluation mode reads the running statistics on the CPU.
  placed->eval();
  reference->eval();
  NoGradGuard no_grad;
  const Tensor x = image_batches(g, 2)[1].x;
  check_close("eval output", placed->forward(x), reference->forward(x.to(e.dtype)));
}

TEST_CASE("checkpoints of a placed model are device-free and load into one device and back", "[placement][gpus:3]") {
  require_three_devices();
  manual_seed(45);
  auto bare = std::make_shared<SplitNet>();
  auto placed = twin(bare, kCpu);
  placed->place(kCpu, kCuda0, kCuda1);
  const auto placement = devices_of(*placed);

  // The keys carry no device: the same as the bare model's, in the same order.
  const NamedTensors bare_state = bare->state_dict(), placed_state = placed->state_dict();
  REQUIRE(placed_state.size() == bare_state.size());
  for (size_t i = 0; i < bare_state.size(); ++i) {
    CHECK(placed_state[i].first == bare_state[i].first);
    CHECK_THAT(placed_state[i].first, !Contains("cuda") && !Contains("cpu"));
  }

  Trainee original{placed, make_optimizer(Opt::kAdam, placed->parameters())};
  Generator g(46);
  for (const Batch& b : image_batches(g, 2)) original.step(b.x, b.y);
  const std::string path = temp_path("placed.safetensors");
  nn::save_checkpoint(path, *placed, original.optimizer.get(), nullptr, nn::TrainingState{0, 2, 0, 0});

  // A freshly initialised model on `device`, or placed as the original, with the checkpoint loaded.
  auto restored = [&](const std::string& file, std::optional<Device> device) {
    manual_seed(47);  // other initial values than the original's
    auto model = std::make_shared<SplitNet>();
    if (device)
      model->place(*device, *device, *device);
    else
      model->place(kCpu, kCuda0, kCuda1);
    Trainee t{model, make_optimizer(Opt::kAdam, model->parameters())};
    const auto where = devices_of(*model);
    nn::TrainingState state = nn::load_checkpoint(file, *model, t.optimizer.get(), nullptr, nullptr);
    CHECK(state.step == 2);
    check_devices(*model, where);  // each tensor landed on its parameter's device
    check_same_state(*model, *placed, 0.0);
    check_same_optimizer_state(t, original, 0.0);
    return t;
  };
  std::vector<Trainee> loaded;
  {
    INFO("loaded on the CPU");
    loaded.push_back(restored(path, kCpu));
  }
  {
    INFO("loaded on cuda:2");
    loaded.push_back(restored(path, kCuda2));
  }
  {
    INFO("cuda:2's checkpoint loaded into the placed model");
    const std::string single = temp_path("single.safetensors");
    nn::save_checkpoint(single, *loaded[1].model, loaded[1].optimizer.get(), nullptr, nn::TrainingState{0, 2, 0, 0});
    loaded.push_back(restored(single, std::nullopt));
    check_devices(*loaded.back().model, placement);
  }
  {
    INFO("the weights alone, straight onto cuda:2");
    const NamedTensors weights = nn::load_checkpoint(path, kCuda2), saved = placed->state_dict();
    REQUIRE(weights.size() == bare_state.size());
    for (size_t i = 0; i < weights.size(); ++i) {
      CHECK(weights[i].first == bare_state[i].first);
      CHECK(weights[i].second.device() == kCuda2);
      check_close(weights[i].first, weights[i].second, saved[i].second, 0.0);
    }
  }
  {
    INFO("load_state_dict from the placed model's tensors straight into cuda:2 (device-to-device copies)");
    manual_seed(48);
    auto model = std::make_shared<SplitNet>();
    model->place(kCuda2, kCuda2, kCuda2);
    model->load_state_dict(placed->state_dict());
    check_same_state(*model, *placed, 0.0);
    for (const Tensor& t : model->parameters()) CHECK(t.device() == kCuda2);
  }

  // Training continues as it would have: a step after loading equals the original's next step.
  const Batch next = image_batches(g, 1)[0];
  const Tensor expected = original.step(next.x, next.y);
  for (size_t i = 0; i < loaded.size(); ++i) {
    INFO("the step after loading, copy " << i);
    check_close("loss", loaded[i].step(next.x, next.y), expected);
    check_same_state(*loaded[i].model, *placed);
    check_same_optimizer_state(loaded[i], original, 1e-5);
  }
}

TEST_CASE("an op mixing devices without a to() raises naming both devices", "[placement][errors][gpus:3]") {
  require_three_devices();
  manual_seed(49);
  Generator g(50);
  {
    INFO("the seed example without x.to(cuda:1)");
    auto net = std::make_shared<SeedNet>();
    net->place(kCuda0, kCuda1);
    net->forget_hop = true;
    const std::string message = error_of([&] { net->forward(randn({4, SeedNet::kIn}, {}, &g)); });
    CHECK_THAT(message, Contains("Linear") && Contains("expected input on cuda:1") && Contains("got cuda:0"));
    // The mistake leaves nothing behind: with the hop, the same model trains.
    net->forget_hop = false;
    Trainee t{net, make_optimizer(Opt::kSgd, net->parameters())};
    const Batch b = seed_batches(g, 1)[0];
    CHECK(std::isfinite(t.step(b.x, b.y).item<double>()));
  }
  {
    INFO("a CPU input into a stem on cuda:0");
    auto net = std::make_shared<SplitNet>();
    net->stem->to(kCuda0);
    const std::string message = error_of([&] { net->stem->forward(randn({2, 3, 5, 5}, {}, &g)); });
    CHECK_THAT(message, Contains("conv2d") && Contains("cpu") && Contains("cuda:0"));
  }
  {
    INFO("batch norm on cuda:1, its input on cuda:0");
    nn::BatchNorm2d bn(3);
    bn->to(kCuda1);
    const std::string message = error_of([&] { bn(randn({2, 3, 4, 4}, {}, &g).to(kCuda0)); });
    CHECK_THAT(message, Contains("BatchNorm2d") && Contains("expected input on cuda:1") && Contains("got cuda:0"));
    // The failed forward neither counted the batch nor touched the running statistics.
    CHECK(bn->num_batches_tracked.cpu().item<int64_t>() == 0);
    CHECK(bn->running_mean.cpu().abs().amax().item<double>() == 0.0);
    CHECK((bn->running_var.cpu() - 1.0).abs().amax().item<double>() == 0.0);
    bn->eval();
    const std::string eval_message = error_of([&] { bn(randn({2, 3, 4, 4}, {}, &g)); });
    CHECK_THAT(eval_message, Contains("BatchNorm2d") && Contains("cpu") && Contains("cuda:1"));
  }
  {
    INFO("layer norm and embedding on cuda:1, their inputs on cuda:0");
    nn::LayerNorm norm(nn::LayerNormOptions(Shape{4}));
    norm->to(kCuda1);
    CHECK_THAT(error_of([&] {
                 norm(randn({3, 4}, {}, &g).to(kCuda0));
               }),
               Contains("LayerNorm: expected input on cuda:1") && Contains("got cuda:0"));
    nn::Embedding table(6, 4);
    table->to(kCuda1);
    CHECK_THAT(error_of([&] { table(random_labels(g, 3, 6).to(kCuda0)); }),
               Contains("Embedding: expected input on cuda:1") && Contains("got cuda:0"));
  }
  {
    INFO("a residual add across devices");
    const Tensor a = randn({3, 4}, {}, &g).to(kCuda0), b = randn({3, 4}, {}, &g).to(kCuda1);
    CHECK_THAT(error_of([&] { return a + b; }), Contains("cuda:0") && Contains("cuda:1"));
  }
  {
    INFO("labels left on another device than the output");
    const Tensor out = randn({3, 4}, {}, &g).to(kCuda1).requires_grad_(true);
    const Tensor labels = random_labels(g, 3, 4).to(kCuda0);
    CHECK_THAT(error_of([&] { return cross_entropy(out, labels); }), Contains("cuda:0") && Contains("cuda:1"));
  }
}
