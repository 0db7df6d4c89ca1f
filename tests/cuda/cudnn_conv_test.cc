// cuDNN's conv2d passes against Ember's im2col + GEMM (cuda::set_conv_kernel) on a real GPU: stride,
// padding, dilation, groups, odd sizes and a misaligned view, in every floating dtype, with and
// without TF32; that cuda::conv2d_kernel dispatches to cuDNN; and that the algorithm cache plans each
// problem once. GPU-only: on emulated devices both sides would be Ember's.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/ember_core.h"
#include "core/kernel_select.h"
#include "cuda/api.h"
#include "cuda/conv.h"
#include "cuda/cudnn_conv.h"
#include "tests/cuda/conv_choice_guard.h"

using namespace ember;

namespace {

struct Case {
  int64_t n, c, h, w, o, kh, kw;
  ConvParams p;  // stride h, w; padding h, w; dilation h, w; groups
};

const std::vector<Case> kCases = {
    {2, 3, 9, 11, 4, 3, 3, {1, 1, 1, 1, 1, 1, 1}},     // C * H * W odd: the offset view is misaligned
    {3, 6, 12, 10, 9, 3, 3, {2, 2, 1, 1, 1, 1, 3}},    // stride 2, 3 groups
    {2, 8, 11, 9, 8, 3, 3, {1, 1, 2, 2, 2, 2, 8}},     // depthwise, dilation 2
    {1, 4, 7, 13, 6, 1, 1, {1, 1, 0, 0, 1, 1, 2}},     // 1x1, 2 groups
    {2, 5, 15, 14, 7, 5, 3, {3, 2, 2, 1, 1, 2, 1}},    // everything asymmetric
    {8, 32, 16, 16, 64, 3, 3, {1, 1, 1, 1, 1, 1, 1}},  // a ResNet-sized layer
};

Shape output_shape(const Case& c) {
  const ConvParams& p = c.p;
  return {c.n, c.o, (c.h + 2 * p.pad_h - p.dilation_h * (c.kh - 1) - 1) / p.stride_h + 1,
          (c.w + 2 * p.pad_w - p.dilation_w * (c.kw - 1) - 1) / p.stride_w + 1};
}

struct Operands {
  Tensor x, w, dy;
};

// On cuda:0; x is a view one image into a larger buffer, so its data starts C * H * W elements in.
Operands operands(const Case& c, DType dtype) {
  const TensorOptions f64(kFloat64);
  const Device gpu = Device::cuda(0);
  Operands o;
  o.x = randn({c.n + 1, c.c, c.h, c.w}, f64).to(dtype).to(gpu).narrow(0, 1, c.n);
  o.w = randn({c.o, c.c / c.p.groups, c.kh, c.kw}, f64).to(dtype).to(gpu);
  o.dy = randn(output_shape(c), f64).to(dtype).to(gpu);
  return o;
}

struct Grads {
  Tensor y, dx, dw;
  bool ran = true;  // whether cuDNN took all three passes
};

Grads by_cudnn(const Case& c, const Operands& o, bool allow_tf32) {
  Grads g;
  g.y = empty(output_shape(c), o.x.options());
  g.dx = empty(o.x.sizes(), o.x.options());
  g.dw = empty(o.w.sizes(), o.w.options());
  // All three asked, even after a refusal, so that each pass is planned.
  const bool forward = cuda::cudnn_conv_forward(o.x, o.w, g.y, c.p, allow_tf32);
  const bool data = cuda::cudnn_conv_backward_data(o.dy, o.w, g.dx, c.p, allow_tf32);
  const bool filter = cuda::cudnn_conv_backward_filter(o.dy, o.x, g.dw, c.p, allow_tf32);
  g.ran = forward && data && filter;
  return g;
}

// The kernel table's entries with `kernel` chosen, restoring cuDNN after.
Grads by_table(const Case& c, const Operands& o, cuda::ConvKernel kernel) {
  struct Restore {
    ~Restore() { cuda::set_conv_kernel(cuda::ConvKernel::Auto); }
  } restore;
  cuda::set_conv_kernel(kernel);
  Grads g;
  g.y = cuda::conv2d_kernel(o.x, o.w, Tensor(), c.p);
  g.dx = cuda::conv2d_backward_input_kernel(o.dy, o.w, o.x.sizes(), c.p);
  g.dw = cuda::conv2d_backward_weight_kernel(o.dy, o.x, o.w.sizes(), false, c.p).first;
  return g;
}

// max |got - want|, relative to the largest |want| (at least 1).
double relative_error(const Tensor& got, const Tensor& want) {
  REQUIRE(got.sizes() == want.sizes());
  const Tensor g = got.cpu().to(kFloat64), w = want.cpu().to(kFloat64);
  return (g - w).abs().amax().item<double>() / std::max(1.0, w.abs().amax().item<double>());
}

double tolerance(DType dtype, bool tf32) {
  switch (dtype) {
    case kFloat64:
      return 1e-12;
    case kFloat32:
      return tf32 ? 1e-2 : 1e-5;
    case kFloat16:
      return 1e-2;
    default:
      return 4e-2;  // bfloat16: 8 mantissa bits, rounded differently by each side
  }
}

struct Tf32Guard {
  explicit Tf32Guard(bool allow) { cuda::set_cudnn_allow_tf32(allow); }
  ~Tf32Guard() { cuda::set_cudnn_allow_tf32(true); }
};

}  // namespace

TEST_CASE("cuDNN's conv2d passes equal Ember's im2col + GEMM on cuda:0") {
  REQUIRE(cuda::device_count() >= 1);
  manual_seed(11);
  for (bool tf32 : {false, true}) {
    for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      if (tf32 && dtype != kFloat32) continue;
      for (const Case& c : kCases) {
        INFO(dtype_name(dtype) << " tf32=" << tf32 << " x [" << c.n << ", " << c.c << ", " << c.h << ", " << c.w
                               << "] weight [" << c.o << ", " << c.c / c.p.groups << ", " << c.kh << ", " << c.kw
                               << "] groups " << c.p.groups);
        const Operands o = operands(c, dtype);
        const Grads cudnn = by_cudnn(c, o, tf32);
        CHECK(cudnn.ran);
        if (!cudnn.ran) continue;
        const Grads ember = by_table(c, o, cuda::ConvKernel::Ember);
        const double tol = tolerance(dtype, tf32);
        CHECK(relative_error(cudnn.y, ember.y) <= tol);
        CHECK(relative_error(cudnn.dx, ember.dx) <= tol);
        CHECK(relative_error(cudnn.dw, ember.dw) <= tol);
      }
    }
  }
}

TEST_CASE("cuda::conv2d_kernel and its backward kernels run cuDNN with the TF32 switch's math") {
  REQUIRE(cuda::device_count() >= 1);
  manual_seed(12);
  const Case& c = kCases[1];
  const Operands o = operands(c, kFloat32);
  for (bool tf32 : {false, true}) {
    INFO("tf32=" << tf32);
    Tf32Guard guard(tf32);
    const Grads direct = by_cudnn(c, o, tf32);
    REQUIRE(direct.ran);
    // The same algorithm on the same data gives the same bits: only deterministic ones are chosen.
    const Grads table = by_table(c, o, cuda::ConvKernel::Auto);
    CHECK(relative_error(table.y, direct.y) == 0.0);
    CHECK(relative_error(table.dx, direct.dx) == 0.0);
    CHECK(relative_error(table.dw, direct.dw) == 0.0);
  }
}

TEST_CASE("cuDNN's algorithm is chosen once per pass, problem and math type") {
  REQUIRE(cuda::device_count() >= 1);
  manual_seed(13);
  const Case c = {3, 7, 19, 17, 5, 3, 3, {1, 2, 1, 0, 2, 1, 1}};  // used by no other test here
  const size_t start = cuda::cudnn_conv_cached_plans();
  by_cudnn(c, operands(c, kFloat32), false);
  CHECK(cuda::cudnn_conv_cached_plans() == start + 3);
  by_cudnn(c, operands(c, kFloat32), false);
  CHECK(cuda::cudnn_conv_cached_plans() == start + 3);
  // TF32 changes float32's math type, so it is another problem; float64's it does not change.
  by_cudnn(c, operands(c, kFloat32), true);
  CHECK(cuda::cudnn_conv_cached_plans() == start + 6);
  by_cudnn(c, operands(c, kFloat64), true);
  by_cudnn(c, operands(c, kFloat64), false);
  CHECK(cuda::cudnn_conv_cached_plans() == start + 9);
}

// The choice by measurement (cuda/conv.cc through core/kernel_select.h): in benchmark mode each
// pass's candidates are cuDNN's usable algorithms (deterministic ones unless switched), then
// Ember's; each, forced, equals Ember's im2col within the dtype's tolerance.
TEST_CASE("cuDNN's algorithms are chosen by measurement, and each equals Ember's kernels") {
  REQUIRE(cuda::device_count() >= 1);
  manual_seed(14);
  testing::ConvChoiceGuard restore;
  const Case& c = kCases[5];  // a ResNet-sized layer: several algorithms apply
  const Operands o = operands(c, kFloat32);
  Tf32Guard tf32(false);
  const Grads ember = by_table(c, o, cuda::ConvKernel::Ember);
  for (bool deterministic : {true, false}) {
    INFO("deterministic=" << deterministic);
    cuda::set_conv_deterministic(deterministic);
    kernel_select::reset();
    kernel_select::set_mode(kernel_select::Mode::Benchmark);
    by_table(c, o, cuda::ConvKernel::Auto);
    std::vector<std::string> names;
    int decided = 0;
    for (const auto& d : kernel_select::decisions()) {
      if (d.key.rfind("cuda conv2d ", 0) != 0) continue;
      ++decided;
      CHECK(d.how == "measured");
      CHECK(d.candidates.front().rfind("cudnn-", 0) == 0);
      CHECK(std::find(d.candidates.begin(), d.candidates.end(), "ember-im2col") != d.candidates.end());
      for (const std::string& name : d.candidates)
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    CHECK(decided == 3);
    for (const std::string& name : names) {
      INFO("forced " << name);
      kernel_select::force(name);
      const Grads forced = by_table(c, o, cuda::ConvKernel::Auto);
      CHECK(relative_error(forced.y, ember.y) <= 1e-4);
      CHECK(relative_error(forced.dx, ember.dx) <= 1e-4);
      CHECK(relative_error(forced.dw, ember.dw) <= 1e-4);
    }
    kernel_select::force("");
  }
}
