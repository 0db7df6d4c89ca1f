// parallel::ModelParallel on 3 emulated devices and the CPU: a small ResNet in as_sequential's form
// placed in stages (balanced by parameters, or by hand with the CPU in the middle) trains K SGD
// steps as the unsplit model does on cuda:0, input gradient included; its checkpoint keys are the
// model's and states load both ways; a bad balance, a missing device, to() and a failing stage
// raise errors naming the numbers, devices and stage.
#include <catch2/catch.hpp>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "models/resnet.h"
#include "models/sequential_form.h"
#include "nn/nn.h"
#include "nn/optim/optim.h"
#include "parallel/model_parallel.h"
#include "parallel/pipeline.h"
#include "tests/autograd/test_util.h"
#include "tests/parallel/data_parallel_helpers.h"

using namespace ember;
using namespace ember::testing;
using parallel::ModelParallel;

namespace {

// Under AddressSanitizer the emulator runs ~15x slower: smaller images and fewer steps.
#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kSide = 7;
constexpr int kSteps = 2;
#else
constexpr int64_t kSide = 11;
constexpr int kSteps = 4;
#endif
constexpr int64_t kBatch = 5, kClasses = 6;
const Device kCpu = Device(kCPU);

// Constructs and drops a ModelParallel (for the errors its constructor raises).
void place(nn::Sequential seq, std::vector<Device> devices, std::vector<int64_t> balance = {}) {
  ModelParallel placed(std::move(seq), std::move(devices), std::move(balance));
}

void require_three_devices() {
  REQUIRE(cuda::device_count() >= 3);
  cuda::set_cudnn_allow_tf32(false);
}

// conv1, bn1, relu, layer1.0, layer2.0, layer2.1, avgpool, flatten, fc: BasicBlocks with
// projection shortcuts, so every stage boundary cuts through something with parameters or stats.
models::ResNet small_resnet() {
  models::ResNetConfig c;
  c.blocks = {1, 2};
  c.widths = {4, 7};
  c.stem_width = 5;
  c.shortcut = models::Shortcut::B;
  c.in_channels = 3;
  c.num_classes = kClasses;
  c.name = "SmallResNet";
  return models::ResNet(c);
}

std::vector<std::string> keys_of(const NamedTensors& state) {
  std::vector<std::string> out;
  for (const auto& [name, t] : state) out.push_back(name);
  return out;
}

optim::SGD make_sgd(const nn::Module& m) {
  return optim::SGD(m.parameters(), optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3));
}

// K steps of `placed` against `reference` (the same values, on cuda:0): losses, the input's
// gradient, and every parameter and buffer after each step.
void check_training(ModelParallel& placed, nn::Module& reference) {
  optim::SGD sgd = make_sgd(placed), reference_sgd = make_sgd(reference);
  Generator g(41);
  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step);
    Tensor x = random_images(g, kBatch, 3, kSide, kSide + 2), y = random_labels(g, kBatch, kClasses);
    Tensor a = x.detach().requires_grad_(true), b = x.to(kCuda0).detach().requires_grad_(true);
    sgd.zero_grad();
    reference_sgd.zero_grad();
    Tensor out = placed.forward(a);
    REQUIRE(out.device() == placed.devices().back());
    Tensor loss = cross_entropy(out, y.to(out.device()));
    Tensor expected = cross_entropy(reference.forward(b), y.to(kCuda0));
    loss.backward();
    expected.backward();
    check_close("loss", loss, expected);
    REQUIRE(a.grad().device() == kCpu);
    check_close("input gradient", a.grad(), b.grad());
    check_same_grads(placed, reference);
    sgd.step();
    reference_sgd.step();
    check_same_state(placed, reference);
  }
  // Each stage's parameters (and their gradients and momentum) stayed on its device.
  for (int64_t i = 0; i < placed.num_stages(); ++i)
    for (const Tensor& p : placed.stage(i)->parameters()) {
      CHECK(p.device() == placed.devices()[static_cast<size_t>(i)]);
      CHECK(p.grad().device() == p.device());
    }
  // Evaluation too.
  placed.eval();
  reference.eval();
  NoGradGuard no_grad;
  Tensor x = random_images(g, kBatch, 3, kSide, kSide + 2);
  check_close("evaluation output", placed.forward(x), reference.forward(x.to(kCuda0)));
}

}  // namespace

TEST_CASE("ModelParallel: K SGD steps with the CPU as a middle stage equal one device", "[model_parallel][gpus:3]") {
  require_three_devices();
  manual_seed(5);
  auto model = small_resnet().ptr();
  auto reference = model->clone(kCuda0);
  // conv1, bn1, relu | layer1.0, layer2.0 on the CPU | layer2.1, avgpool, flatten, fc.
  ModelParallel placed(models::as_sequential(model), {Device::cuda(2), kCpu, Device::cuda(1)}, {3, 2, 4});
  CHECK(placed.balance() == std::vector<int64_t>{3, 2, 4});
  REQUIRE(placed.stage(1)->size() == 2);
  CHECK(placed.stage(1)->name(0) == "layer1.0");
  CHECK(placed.stage(2)->name(0) == "layer2.1");
  // The model's own tensors moved: ModelParallel shares them.
  CHECK(model->named_parameters().front().second.device() == Device::cuda(2));
  CHECK(model->named_parameters().back().second.device() == Device::cuda(1));
  check_training(placed, *reference);
}

TEST_CASE("ModelParallel: balanced by parameters on three GPUs, equal to one device", "[model_parallel][gpus:3]") {
  require_three_devices();
  manual_seed(6);
  auto model = small_resnet().ptr();
  auto reference = model->clone(kCuda0);
  nn::Sequential seq = models::as_sequential(model);
  const std::vector<int64_t> expected_balance = parallel::balance_by_parameters(seq, 3);
  ModelParallel placed(seq, cuda_devices(3));
  CHECK(placed.balance() == expected_balance);
  int64_t layers = 0;
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(placed.stage(i)->size() == static_cast<size_t>(placed.balance()[static_cast<size_t>(i)]));
    layers += static_cast<int64_t>(placed.stage(i)->size());
  }
  CHECK(layers == static_cast<int64_t>(seq->size()));
  check_training(placed, *reference);
}

TEST_CASE("ModelParallel: the model's checkpoint keys; states load into the unsplit model and back",
          "[model_parallel][gpus:3]") {
  require_three_devices();
  manual_seed(7);
  auto model = small_resnet().ptr();
  auto unsplit = small_resnet().ptr();  // other values
  const std::vector<std::string> model_keys = keys_of(unsplit->state_dict());
  ModelParallel placed(models::as_sequential(model), {kCpu, Device::cuda(1), Device::cuda(2)}, {4, 1, 4});
  CHECK(keys_of(placed.state_dict()) == model_keys);
  std::vector<std::string> parameter_names;
  for (const auto& [name, p] : placed.named_parameters()) parameter_names.push_back(name);
  std::vector<std::string> expected_names;
  for (const auto& [name, p] : unsplit->named_parameters()) expected_names.push_back(name);
  CHECK(parameter_names == expected_names);
  CHECK(placed.named_buffers().size() == unsplit->named_buffers().size());

  // Placed -> unsplit (on cuda:0), then evaluation agrees.
  unsplit->to(kCuda0);
  unsplit->load_state_dict(placed.state_dict());
  placed.eval();
  unsplit->eval();
  Generator g(3);
  Tensor x = random_images(g, 3, 3, kSide, kSide);
  {
    NoGradGuard no_grad;
    check_close("output after loading the placed state", unsplit->forward(x.to(kCuda0)), placed.forward(x));
  }
  // Unsplit -> placed: a fresh model's values land on each stage's device.
  auto fresh = small_resnet().ptr();
  placed.load_state_dict(fresh->state_dict());
  for (int64_t i = 0; i < placed.num_stages(); ++i)
    for (const Tensor& p : placed.stage(i)->parameters()) CHECK(p.device() == placed.devices()[static_cast<size_t>(i)]);
  check_same_state(placed, *fresh);
}

TEST_CASE("ModelParallel: a bad balance, device or call names the numbers and devices", "[model_parallel][gpus:3]") {
  require_three_devices();
  auto seq = [] { return models::as_sequential(small_resnet().ptr()); };  // 9 layers
  const std::vector<Device> two{Device::cuda(0), Device::cuda(1)};
  CHECK(error_of([&] {
          place(seq(), two, {4, 4});
        }) == "ModelParallel: balance [4, 4] sums to 8 layers, but the Sequential has 9");
  CHECK(error_of([&] {
          place(seq(), two, {9, 0});
        }) == "ModelParallel: balance [9, 0] gives stage 1 (cuda:1) 0 layers; each stage needs at least one");
  CHECK(error_of([&] {
          place(seq(), two, {2, 3, 4});
        }) == "ModelParallel: balance [2, 3, 4] has 3 entries for 2 devices [cuda:0, cuda:1]; expected one per device");
  nn::Sequential short_seq(nn::Linear(3, 4), nn::ReLU());
  CHECK(error_of([&] { place(short_seq, cuda_devices(3)); }) ==
        "ModelParallel: 3 devices [cuda:0, cuda:1, cuda:2] make 3 stages, but the Sequential has only 2 layers; each "
        "stage needs at least one");
  CHECK(error_of([&] {
          place(short_seq, cuda_devices(3), {1, 1, 0});
        }) ==
        "ModelParallel: 3 devices [cuda:0, cuda:1, cuda:2] make 3 stages, but the Sequential has only 2 layers; each "
        "stage needs at least one");
  CHECK(error_of([&] { place(short_seq, {}); }) == "ModelParallel: no devices given; expected one device per stage");
  CHECK_THAT(error_of([&] {
               place(short_seq, {Device::cuda(0), Device::cuda(7)});
             }),
             Catch::StartsWith("ModelParallel: devices[1] is cuda:7, which is not available: "));
  // A module listed in two stages on different devices.
  nn::Linear shared(4, 4);
  CHECK_THAT(error_of([&] {
               place(nn::Sequential(shared, nn::ReLU(), shared), {Device::cuda(0), Device::cuda(1)}, {1, 2});
             }),
             Catch::Contains("stage 0's parameter '0.weight' is on cuda:1 instead of cuda:0"));

  ModelParallel placed(seq(), {Device::cuda(0), kCpu}, {5, 4});
  CHECK(error_of([&] { placed.to(Device::cuda(2)); }) ==
        "ModelParallel::to(cuda:2): the placement is fixed at construction (stage 0 on cuda:0, stage 1 on cpu); "
        "build a new ModelParallel to place the layers elsewhere");
  CHECK(placed.named_parameters().front().second.device() == Device::cuda(0));
  CHECK_THAT(
      error_of([&] {
        placed.forward(zeros({2, 4, 8, 8}));
      }),
      Catch::StartsWith("ModelParallel: stage 0 on cuda:0 (layers 0 to 4): ") && Catch::Contains("[2, 4, 8, 8]"));
  CHECK_THAT(error_of([&] { placed.stage(2); }), Catch::Contains("stage 2 is out of range for 2 stages"));
  CHECK(placed.extra_repr() == "devices=[cuda:0, cpu], balance=[5, 4]");
  // to(dtype) is no placement: it converts every stage where it is.
  placed.to(kFloat64);
  CHECK(placed.named_parameters().back().second.dtype() == kFloat64);
  CHECK(placed.named_parameters().back().second.device() == kCpu);
}
