// conv2d's algorithm on CUDA devices chosen by measurement through core/kernel_select.h (as
// cudnn.benchmark): the keys (pass, shapes, geometry, dtype, math type, the deterministic switch,
// the device and its name), the candidates (on emulated devices Ember's im2col over chunks of
// images or image by image; on real GPUs cuDNN's algorithms before them), trials in benchmark mode
// and none in heuristic mode, and every candidate, forced, equal to the CPU's convolution.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/ember_core.h"
#include "core/kernel_select.h"
#include "cuda/api.h"
#include "cuda/conv.h"
#include "tests/cuda/conv_choice_guard.h"

using namespace ember;

namespace {

struct Passes {
  Tensor y, dx, dw;
};

// The three passes through the device's kernel table.
Passes run(const Tensor& x, const Tensor& w, const Tensor& dy, const ConvParams& p) {
  const KernelTable& table = kernels_for(x.device(), "conv_select_test");
  Passes r;
  r.y = table.conv2d(x, w, Tensor(), p);
  r.dx = table.conv2d_backward_input(dy, w, x.sizes(), p);
  r.dw = table.conv2d_backward_weight(dy, x, w.sizes(), false, p).first;
  return r;
}

double relative_error(const Tensor& got, const Tensor& want) {
  const Tensor g = got.cpu().to(kFloat64), w = want.cpu().to(kFloat64);
  return (g - w).abs().amax().item<double>() / std::max(1.0, w.abs().amax().item<double>());
}

std::vector<kernel_select::Decision> cuda_decisions() {
  std::vector<kernel_select::Decision> out;
  for (const auto& d : kernel_select::decisions())
    if (d.key.rfind("cuda conv2d ", 0) == 0) out.push_back(d);
  return out;
}

}  // namespace

TEST_CASE("cuda conv2d: benchmark mode times every candidate once per key, forced ones equal the CPU's") {
  REQUIRE(cuda::device_count() >= 1);
  testing::ConvChoiceGuard restore;
  manual_seed(21);
  const Device gpu = Device::cuda(0);
  ConvParams p;
  p.stride_h = 2, p.pad_h = p.pad_w = 1, p.groups = 2;
  const Tensor x = randn({3, 6, 9, 11}), w = randn({8, 3, 3, 3});
  const Tensor dy = randn({3, 8, 5, 11});
  const Passes cpu = run(x, w, dy, p);

  kernel_select::reset();
  kernel_select::set_mode(kernel_select::Mode::Benchmark);
  const Passes measured = run(x.to(gpu), w.to(gpu), dy.to(gpu), p);
  std::vector<kernel_select::Decision> made = cuda_decisions();
  REQUIRE(made.size() == 3);
  std::vector<std::string> names;
  for (const auto& d : made) {
    INFO(d.key);
    CHECK(d.how == "measured");
    CHECK(d.key.find(" float32 x=3x6x9x11 w=8x3x3x3 s=2x1 p=1x1 d=1x1 g=2 math=tf32 deterministic ") !=
          std::string::npos);
    CHECK(d.key.find("cuda:0 (") != std::string::npos);
    REQUIRE(d.candidates.size() >= 2);  // im2col over chunks and image by image, at least
    CHECK(d.seconds.size() == d.candidates.size());
    for (double s : d.seconds) CHECK(s >= 0);
    names = d.candidates;
  }
  CHECK(relative_error(measured.y, cpu.y) < 1e-5);
  CHECK(relative_error(measured.dx, cpu.dx) < 1e-5);
  CHECK(relative_error(measured.dw, cpu.dw) < 1e-5);
  // Decided once: the same shapes again add no decision.
  run(x.to(gpu), w.to(gpu), dy.to(gpu), p);
  CHECK(cuda_decisions().size() == 3);
  // Another math type or the deterministic switch is another key.
  cuda::set_cudnn_allow_tf32(false);
  run(x.to(gpu), w.to(gpu), dy.to(gpu), p);
  cuda::set_conv_deterministic(false);
  run(x.to(gpu), w.to(gpu), dy.to(gpu), p);
  made = cuda_decisions();
  REQUIRE(made.size() == 9);
  CHECK(made[3].key.find(" math=fma deterministic ") != std::string::npos);
  CHECK(made[6].key.find(" math=fma any ") != std::string::npos);

  for (const std::string& name : names) {
    INFO("forced " << name);
    kernel_select::force(name);
    const Passes forced = run(x.to(gpu), w.to(gpu), dy.to(gpu), p);
    CHECK(relative_error(forced.y, cpu.y) < 1e-5);
    CHECK(relative_error(forced.dx, cpu.dx) < 1e-5);
    CHECK(relative_error(forced.dw, cpu.dw) < 1e-5);
    int ran = 0;
    for (const auto& d : cuda_decisions()) ran += d.how == "forced" && d.candidates[d.chosen] == name;
    CHECK(ran >= 3);
  }
}

TEST_CASE("cuda conv2d: heuristic mode runs the first candidate without trials") {
  REQUIRE(cuda::device_count() >= 1);
  testing::ConvChoiceGuard restore;
  manual_seed(22);
  kernel_select::reset();
  kernel_select::set_mode(kernel_select::Mode::Heuristic);
  const Device gpu = Device::cuda(0);
  ConvParams p;
  const Tensor x = randn({2, 4, 7, 7}, {}).to(gpu), w = randn({5, 4, 3, 3}).to(gpu), dy = randn({2, 5, 5, 5}).to(gpu);
  run(x, w, dy, p);
  const std::vector<kernel_select::Decision> made = cuda_decisions();
  REQUIRE(made.size() == 3);
  for (const auto& d : made) {
    CHECK(d.how == "heuristic");
    CHECK(d.seconds.empty());
    CHECK(d.chosen == 0);
  }
}
