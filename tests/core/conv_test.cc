// The CPU backend's conv2d kernels (oneDNN fast path) against Ember's im2col reference and a naive
// float64 direct convolution, over many geometries and input layouts (NCHW, channels-last,
// mixed, non-contiguous), for the forward pass and both backward kernels.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/cpu/conv/conv_reference.h"
#include "core/cpu/isa.h"
#include "core/cpu/thread_pool.h"
#include "core/cpu/conv/direct_conv.h"
#include "core/cpu/conv/direct_conv_weight_grad.h"
#include "core/cpu/conv/strided_conv_backward_data.h"
#include "core/cpu/conv/strided_conv_forward.h"
#include "core/cpu/conv/winograd_bf16.h"
#include "core/ember_core.h"
#include "core/kernel_select.h"

namespace {

using namespace ember;

enum class Layout { Contiguous, ChannelsLast, BatchSlice, WidthSlice };

struct Case {
  int64_t n, c, h, w, o, kh, kw;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1, groups = 1;
  bool bias = true;
  Layout input = Layout::Contiguous, grad_output = Layout::Contiguous;

  ConvParams params() const {
    ConvParams p;
    p.stride_h = stride_h, p.stride_w = stride_w, p.pad_h = pad_h, p.pad_w = pad_w;
    p.dilation_h = dilation_h, p.dilation_w = dilation_w, p.groups = groups;
    return p;
  }
  int64_t oh() const { return (h + 2 * pad_h - dilation_h * (kh - 1) - 1) / stride_h + 1; }
  int64_t ow() const { return (w + 2 * pad_w - dilation_w * (kw - 1) - 1) / stride_w + 1; }
  std::string str() const {
    std::ostringstream s;
    s << "[" << n << "," << c << "," << h << "," << w << "] -> " << o << " k" << kh << "x" << kw << " s" << stride_h
      << "," << stride_w << " p" << pad_h << "," << pad_w << " d" << dilation_h << "," << dilation_w << " g" << groups
      << (bias ? " bias" : "") << " input layout " << int(input) << " grad layout " << int(grad_output);
    return s.str();
  }
};

// A random [n, c, h, w] tensor whose memory has the requested layout.
Tensor make(const Shape& s, Layout layout, DType dtype) {
  switch (layout) {
    case Layout::Contiguous:
      return randn(s, dtype);
    case Layout::ChannelsLast:
      return randn({s[0], s[2], s[3], s[1]}, dtype).permute({0, 3, 1, 2});
    case Layout::BatchSlice:
      return randn({2 * s[0], s[1], s[2], s[3]}, dtype).slice(0, 0, 2 * s[0], 2);
    case Layout::WidthSlice:
      return randn({s[0], s[1], s[2], s[3] + 3}, dtype).narrow(3, 2, s[3]);
  }
  return Tensor();
}

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

// Naive direct convolution in float64: the three passes share one index walk over
// (batch, out channel, out pixel, in channel of the group, kernel tap).
struct Naive {
  const Case& k;
  std::vector<double> x, wt, dy;  // NCHW / OIHW / NCHW contiguous

  template <typename Visit>
  void walk(Visit visit) const {
    const int64_t cg = k.c / k.groups, og = k.o / k.groups;
    for (int64_t b = 0; b < k.n; ++b)
      for (int64_t oc = 0; oc < k.o; ++oc)
        for (int64_t y = 0; y < k.oh(); ++y)
          for (int64_t xo = 0; xo < k.ow(); ++xo)
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t i = 0; i < k.kh; ++i)
                for (int64_t j = 0; j < k.kw; ++j) {
                  const int64_t iy = y * k.stride_h - k.pad_h + i * k.dilation_h;
                  const int64_t ix = xo * k.stride_w - k.pad_w + j * k.dilation_w;
                  if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                  const int64_t channel = (oc / og) * cg + ci;
                  visit(((b * k.c + channel) * k.h + iy) * k.w + ix, ((oc * cg + ci) * k.kh + i) * k.kw + j,
                        ((b * k.o + oc) * k.oh() + y) * k.ow() + xo);
                }
  }
  std::vector<double> forward(const std::vector<double>& bias) const {
    std::vector<double> out(k.n * k.o * k.oh() * k.ow(), 0.0);
    walk([&](int64_t xi, int64_t wi, int64_t yi) { out[yi] += x[xi] * wt[wi]; });
    if (!bias.empty())
      for (size_t i = 0; i < out.size(); ++i) out[i] += bias[(i / (k.oh() * k.ow())) % k.o];
    return out;
  }
  std::vector<double> grad_input() const {
    std::vector<double> out(x.size(), 0.0);
    walk([&](int64_t xi, int64_t wi, int64_t yi) { out[xi] += dy[yi] * wt[wi]; });
    return out;
  }
  std::vector<double> grad_weight() const {
    std::vector<double> out(wt.size(), 0.0);
    walk([&](int64_t xi, int64_t wi, int64_t yi) { out[wi] += dy[yi] * x[xi]; });
    return out;
  }
  std::vector<double> grad_bias() const {
    std::vector<double> out(k.o, 0.0);
    for (size_t i = 0; i < dy.size(); ++i) out[(i / (k.oh() * k.ow())) % k.o] += dy[i];
    return out;
  }
};

// Every element within atol + rtol * |expected|; reports the worst element on failure.
void expect_close(const std::string& what, const std::vector<double>& got, const std::vector<double>& expected,
                  double rtol, double atol) {
  REQUIRE(got.size() == expected.size());
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double excess = std::abs(got[i] - expected[i]) - (atol + rtol * std::abs(expected[i]));
    if (excess > worst_excess) worst_excess = excess, worst = i;
  }
  INFO(what << ": element " << worst << " got " << got[worst] << " expected " << expected[worst]);
  CHECK(worst_excess <= 0);
}

bool channels_last(const Tensor& t) {
  const int64_t c = t.size(1), h = t.size(2), w = t.size(3);
  const Shape expected = {h * w * c, 1, w * c, c};
  for (int d = 0; d < 4; ++d)
    if (t.size(d) != 1 && t.stride(d) != expected[d]) return false;
  return true;
}

// Runs all three passes of `k` through the kernel table and checks them against both references.
void check(const Case& k, DType dtype = kFloat32) {
  INFO(k.str() << " dtype " << dtype_name(dtype));
  const KernelTable& table = kernels_for(Device(kCPU), "conv_test");
  const ConvParams p = k.params();
  const Shape input_shape = {k.n, k.c, k.h, k.w}, weight_shape = {k.o, k.c / k.groups, k.kh, k.kw};
  Tensor x = make(input_shape, k.input, dtype);
  Tensor wt = randn(weight_shape, dtype);
  Tensor bias = k.bias ? randn({k.o}, dtype) : Tensor();
  Tensor dy = make({k.n, k.o, k.oh(), k.ow()}, k.grad_output, dtype);
  Naive naive{k, values(x), values(wt), values(dy)};

  // float32 sums of up to a few hundred unit-variance products: ~1e-5 relative error at worst.
  const double rtol = dtype == kFloat32 ? 2e-4 : dtype == kFloat64 ? 1e-10 : 3e-2;
  const double atol = dtype == kFloat32 ? 2e-4 : dtype == kFloat64 ? 1e-10 : 1.5e-1;
  const bool fast = dtype == kFloat32;  // the dtype oneDNN must take on every machine

  Tensor y = table.conv2d(x, wt, bias, p);
  REQUIRE(y.sizes() == Shape{k.n, k.o, k.oh(), k.ow()});
  REQUIRE(y.dtype() == dtype);
  if (fast) CHECK(channels_last(y));
  expect_close("forward vs naive", values(y), naive.forward(k.bias ? values(bias) : std::vector<double>{}), rtol, atol);
  expect_close("forward vs reference", values(y), values(cpu::reference::conv2d(x, wt, bias, p)), rtol, atol);

  Tensor dx = table.conv2d_backward_input(dy, wt, input_shape, p);
  REQUIRE(dx.sizes() == input_shape);
  if (fast) CHECK(channels_last(dx));
  expect_close("grad input vs naive", values(dx), naive.grad_input(), rtol, atol);
  expect_close("grad input vs reference", values(dx),
               values(cpu::reference::conv2d_backward_input(dy, wt, input_shape, p)), rtol, atol);

  auto [dw, db] = table.conv2d_backward_weight(dy, x, weight_shape, k.bias, p);
  REQUIRE(dw.sizes() == weight_shape);
  REQUIRE(db.defined() == k.bias);
  // Weight gradients sum N*OH*OW products, so allow error growing with that count.
  const double reduction = std::sqrt(static_cast<double>(k.n * k.oh() * k.ow()));
  expect_close("grad weight vs naive", values(dw), naive.grad_weight(), rtol, atol * reduction);
  auto [ref_dw, ref_db] = cpu::reference::conv2d_backward_weight(dy, x, weight_shape, k.bias, p);
  expect_close("grad weight vs reference", values(dw), values(ref_dw), rtol, atol * reduction);
  if (k.bias) {
    expect_close("grad bias vs naive", values(db), naive.grad_bias(), rtol, atol * reduction);
    expect_close("grad bias vs reference", values(db), values(ref_db), rtol, atol * reduction);
  }
}

Case make_case(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k) {
  Case out{n, c, h, w, o, k, k};
  return out;
}

// The same problem as Ember's direct kernels describe it.
cpu::DirectConvGeometry direct_geometry(const Case& k) {
  cpu::DirectConvGeometry g{k.n, k.c, k.h, k.w, k.o, k.kh, k.kw};
  g.stride_h = k.stride_h, g.stride_w = k.stride_w, g.pad_h = k.pad_h, g.pad_w = k.pad_w;
  g.dilation_h = k.dilation_h, g.dilation_w = k.dilation_w;
  REQUIRE(g.out_h() == k.oh());
  REQUIRE(g.out_w() == k.ow());
  return g;
}

// A problem for the strided kernels' own tests: batch 2, undilated.
struct Strided {
  int64_t c, o, h, w, kh, kw, stride_h, stride_w, pad_h, pad_w;
  Case to_case() const {
    Case k{2, c, h, w, o, kh, kw};
    k.stride_h = stride_h, k.stride_w = stride_w, k.pad_h = pad_h, k.pad_w = pad_w;
    return k;
  }
};

}  // namespace

TEST_CASE("conv2d kernels: kernel sizes, strides, padding", "[conv]") {
  manual_seed(1);
  for (int64_t k : {1, 3, 5})
    for (int64_t stride : {1, 2})
      for (int64_t pad : {0, 1, 2}) {
        Case c = make_case(2, 5, 9, 11, 7, k);
        c.stride_h = c.stride_w = stride;
        c.pad_h = c.pad_w = pad;
        c.bias = (k + stride + pad) % 2 == 0;
        check(c);
      }
}

TEST_CASE("conv2d kernels: dilation, asymmetric geometry, batch 1", "[conv]") {
  manual_seed(2);
  Case dilated = make_case(2, 4, 12, 10, 6, 3);
  dilated.dilation_h = dilated.dilation_w = 2;
  dilated.pad_h = dilated.pad_w = 2;
  check(dilated);
  Case mixed = make_case(1, 3, 7, 13, 8, 3);
  mixed.kw = 5;
  mixed.stride_w = 2;
  mixed.pad_h = 1;
  mixed.pad_w = 2;
  mixed.dilation_h = 2;
  check(mixed);
  Case wide = make_case(1, 16, 5, 17, 16, 1);  // 1x1, non-square, batch 1
  check(wide);
}

TEST_CASE("conv2d kernels: groups and depthwise", "[conv]") {
  manual_seed(3);
  Case grouped = make_case(2, 8, 9, 9, 12, 3);
  grouped.groups = 2;
  grouped.pad_h = grouped.pad_w = 1;
  check(grouped);
  Case depthwise = make_case(3, 16, 10, 8, 16, 3);
  depthwise.groups = 16;
  depthwise.pad_h = depthwise.pad_w = 1;
  depthwise.stride_h = depthwise.stride_w = 2;
  check(depthwise);
  Case multiplier = make_case(2, 4, 7, 7, 8, 5);  // depthwise with two outputs per channel
  multiplier.groups = 4;
  multiplier.pad_h = multiplier.pad_w = 2;
  multiplier.bias = false;
  check(multiplier);
}

TEST_CASE("conv2d kernels: channels-last, mixed and non-contiguous layouts", "[conv]") {
  manual_seed(4);
  const Layout layouts[] = {Layout::Contiguous, Layout::ChannelsLast, Layout::BatchSlice, Layout::WidthSlice};
  for (Layout input : layouts)
    for (Layout grad : layouts) {
      Case c = make_case(3, 16, 8, 8, 32, 3);
      c.pad_h = c.pad_w = 1;
      c.stride_h = c.stride_w = input == grad ? 1 : 2;
      c.input = input;
      c.grad_output = grad;
      check(c);
    }
  // NCHW image batches into a channels-last net.
  Case resnet_stem = make_case(4, 3, 16, 16, 16, 3);
  resnet_stem.pad_h = resnet_stem.pad_w = 1;
  resnet_stem.grad_output = Layout::ChannelsLast;
  resnet_stem.bias = false;
  check(resnet_stem);
  Case grayscale = make_case(3, 1, 14, 11, 8, 3);
  grayscale.pad_h = grayscale.pad_w = 1;
  grayscale.stride_h = grayscale.stride_w = 2;
  check(grayscale);
  Case sliced_batch = make_case(3, 4, 9, 9, 16, 3);
  sliced_batch.input = Layout::BatchSlice;
  check(sliced_batch);
}

// 3x3 stride-1 convolutions with >= 32 channels take oneDNN's Winograd kernels (blocked layout,
// reordered in and out), whose rounding differs from a direct sum's.
TEST_CASE("conv2d kernels: the Winograd path (3x3, stride 1, 32+ channels)", "[conv]") {
  manual_seed(6);
  for (int64_t pad : {0, 1}) {
    for (Layout layout : {Layout::ChannelsLast, Layout::Contiguous, Layout::BatchSlice}) {
      Case c = make_case(3, 32, 7, 9, 40, 3);
      c.pad_h = c.pad_w = pad;
      c.bias = pad == 1;
      c.input = layout;
      c.grad_output = pad == 1 ? Layout::ChannelsLast : layout;
      check(c);
    }
  }
  Case odd_channels = make_case(2, 35, 6, 5, 33, 3);
  odd_channels.pad_h = odd_channels.pad_w = 1;
  odd_channels.input = Layout::ChannelsLast;
  check(odd_channels);
}

// Strided 1x1 convolutions with full 16/32-channel blocks (ResNet's projection shortcuts) take
// Ember's own AVX-512 kernel on CPUs that have it; odd pixel counts leave partial tiles.
TEST_CASE("conv2d kernels: strided 1x1 projections (Ember's direct kernel)", "[conv]") {
  manual_seed(7);
  const cpu::DirectConvGeometry resnet{128, 16, 32, 32, 32, 1, 1, 2, 2};
  CHECK(cpu::direct_conv_preferred(resnet) == cpu::direct_conv_supported());
  const Layout layouts[] = {Layout::ChannelsLast, Layout::Contiguous, Layout::WidthSlice};
  int variant = 0;
  for (int64_t c : {16, 32, 48})
    for (int64_t o : {32, 64}) {
      Case k = make_case(2 + variant % 2, c, 9 + variant % 3, 7 + variant % 4, o, 1);
      k.stride_h = 2;
      k.stride_w = variant % 3 == 2 ? 3 : 2;
      k.bias = variant % 2 == 0;
      k.input = layouts[variant % 3];
      k.grad_output = Layout::ChannelsLast;
      check(k);
      ++variant;
    }
}

// The direct kernel on its own, on sizes the kernel table never hands it (channel counts that
// leave partial 16- and 32-lane blocks, 3x3 taps over padding, dilation), against the naive sum.
TEST_CASE("direct conv kernel: odd channel counts, padding, dilation", "[conv]") {
  manual_seed(8);
  if (!cpu::direct_conv_supported()) {
    WARN("no AVX-512 on this CPU: the direct kernel cannot run; checking that conv2d never picks it");
    CHECK_FALSE(cpu::direct_conv_preferred(cpu::DirectConvGeometry{8, 16, 8, 8, 32, 1, 1, 2, 2}));
    return;
  }
  struct Odd {
    int64_t c, o, k, stride, pad, dilation;
  };
  for (const Odd& odd : {Odd{5, 7, 1, 1, 0, 1}, Odd{24, 40, 1, 3, 0, 1}, Odd{33, 70, 3, 2, 1, 1},
                         Odd{16, 32, 3, 1, 2, 2}, Odd{3, 16, 5, 2, 2, 1}}) {
    Case k = make_case(2, odd.c, 11, 9, odd.o, odd.k);
    k.stride_h = k.stride_w = odd.stride;
    k.pad_h = k.pad_w = odd.pad;
    k.dilation_h = k.dilation_w = odd.dilation;
    INFO(k.str());
    const cpu::DirectConvGeometry g = direct_geometry(k);
    Tensor x_nhwc = randn({k.n, k.h, k.w, k.c}), wt = randn({k.o, k.c, k.kh, k.kw}), bias = randn({k.o});
    Tensor y_nhwc = empty({k.n, k.oh(), k.ow(), k.o});
    cpu::direct_conv_forward(g, x_nhwc.data_ptr<float>(), wt.data_ptr<float>(), bias.data_ptr<float>(),
                             y_nhwc.data_ptr<float>());
    Naive naive{k, values(x_nhwc.permute({0, 3, 1, 2})), values(wt), {}};
    expect_close("direct kernel vs naive", values(y_nhwc.permute({0, 3, 1, 2})), naive.forward(values(bias)), 2e-4,
                 2e-4);
  }
}

// Ember's backward-weight kernel on its own (the kernel table hands it only f32 problems with C or
// O a multiple of 8, on AVX2 CPUs without AVX-512): 8-, 16- and 32-lane vectors over the input
// channels or (C = 3, 5) over the output channels, tiles of every height 1-6 (1-3 at 32 lanes),
// stride, padding wider than the kernel's reach, dilation, and tiny images.
TEST_CASE("direct conv weight-gradient kernel: against the naive sum", "[conv]") {
  manual_seed(9);
  // Every x86-64 CPU this project builds for since 2015 has AVX2; one without it fails here
  // rather than passing without running the kernel.
  REQUIRE(cpu::avx2::supported());
  struct Odd {
    int64_t c, o, h, w, k, stride, pad, dilation;
  };
  for (const Odd& odd : {Odd{8, 1, 5, 6, 3, 1, 1, 1}, Odd{16, 7, 9, 7, 3, 2, 1, 1}, Odd{24, 13, 6, 8, 1, 2, 0, 1},
                         Odd{32, 32, 8, 8, 3, 1, 1, 1}, Odd{16, 20, 7, 9, 3, 1, 2, 2}, Odd{40, 9, 3, 2, 5, 1, 3, 1},
                         Odd{8, 64, 4, 4, 3, 3, 1, 1}, Odd{16, 5, 2, 2, 3, 1, 4, 1}, Odd{3, 16, 9, 10, 3, 1, 1, 1},
                         Odd{5, 24, 7, 6, 3, 2, 1, 1}, Odd{1, 8, 5, 5, 5, 1, 2, 1}, Odd{3, 72, 6, 5, 3, 2, 1, 1},
                         Odd{64, 10, 5, 4, 3, 1, 1, 1}, Odd{72, 2, 4, 3, 1, 2, 0, 1}}) {
    Case k = make_case(3, odd.c, odd.h, odd.w, odd.o, odd.k);
    k.stride_h = k.stride_w = odd.stride;
    k.pad_h = k.pad_w = odd.pad;
    k.dilation_h = k.dilation_w = odd.dilation;
    INFO(k.str());
    const cpu::DirectConvGeometry g = direct_geometry(k);
    CHECK(cpu::direct_conv_weight_grad_preferred(g) == !cpu::has_avx512f());
    Tensor x_nhwc = randn({k.n, k.h, k.w, k.c}), dy_nhwc = randn({k.n, k.oh(), k.ow(), k.o});
    Tensor grad = full({k.o, k.c, k.kh, k.kw}, 123.0f);  // overwritten, not accumulated into
    cpu::direct_conv_weight_grad(g, x_nhwc.data_ptr<float>(), dy_nhwc.data_ptr<float>(), grad.data_ptr<float>());
    Naive naive{k, values(x_nhwc.permute({0, 3, 1, 2})), {}, values(dy_nhwc.permute({0, 3, 1, 2}))};
    naive.wt.assign(static_cast<size_t>(k.o * k.c * k.kh * k.kw), 0.0);
    expect_close("weight-gradient kernel vs naive", values(grad), naive.grad_weight(), 2e-4, 2e-4);
  }
  // Neither channel count a multiple of 8: never handed to the kernel.
  CHECK_FALSE(cpu::direct_conv_weight_grad_preferred(cpu::DirectConvGeometry{2, 3, 8, 8, 12, 3, 3}));
}

// Ember's strided backward-data kernel on its own (the kernel table hands it only f32 problems
// with C % 8 == 0, dilation 1 and kernels up to 3x3 on AVX2 CPUs without AVX-512): kernels of
// every size 1-4 against strides 1-3 (a kernel smaller than its stride leaves input pixels no tap
// reaches, which must be zeroed), unequal strides, padding up to and past the kernel's reach, 8-,
// 16- and 32-lane tiles (C up to 72), class rows of every width 1-6 and images too small for any
// interior.
TEST_CASE("strided conv backward-data kernel: against the naive sum", "[conv]") {
  manual_seed(10);
  REQUIRE(cpu::avx2::supported());  // see the weight-gradient kernel's test
  for (const Strided& problem : {Strided{8, 5, 7, 9, 1, 1, 2, 2, 0, 0}, Strided{16, 32, 8, 11, 1, 1, 3, 2, 0, 0},
                                 Strided{24, 13, 5, 4, 1, 1, 1, 3, 0, 0}, Strided{40, 64, 6, 13, 1, 1, 2, 1, 0, 0},
                                 Strided{32, 1, 2, 2, 1, 1, 2, 2, 0, 0}, Strided{16, 32, 32, 32, 3, 3, 2, 2, 1, 1},
                                 Strided{32, 20, 9, 11, 3, 3, 2, 2, 1, 1}, Strided{8, 7, 13, 10, 3, 3, 3, 2, 1, 0},
                                 Strided{24, 9, 7, 7, 3, 3, 2, 3, 2, 3}, Strided{16, 3, 6, 25, 2, 4, 2, 2, 0, 1},
                                 Strided{8, 16, 5, 8, 4, 3, 3, 3, 2, 2}, Strided{40, 11, 12, 14, 3, 3, 1, 1, 1, 1},
                                 Strided{16, 8, 3, 2, 3, 3, 2, 2, 1, 1}, Strided{8, 4, 1, 1, 3, 3, 2, 2, 1, 1},
                                 Strided{72, 6, 15, 17, 3, 3, 2, 2, 1, 1}, Strided{64, 9, 16, 14, 1, 1, 2, 2, 0, 0}}) {
    const Case k = problem.to_case();
    INFO(k.str());
    const cpu::DirectConvGeometry g = direct_geometry(k);
    // (None of these is large enough for streaming zeros, which 1x1 kernels need to be taken.)
    const bool wanted =
        (k.stride_h > 1 || k.stride_w > 1) && k.kh <= 3 && k.kw <= 3 && (k.kh > 1 || k.kw > 1) && k.ow() >= 8;
    CHECK(cpu::strided_conv_backward_data_preferred(g) == (wanted && !cpu::has_avx512f()));
    Tensor dy_nhwc = randn({k.n, k.oh(), k.ow(), k.o}), wt = randn({k.o, k.c, k.kh, k.kw});
    Naive naive{k, {}, values(wt), values(dy_nhwc.permute({0, 3, 1, 2}))};
    naive.x.assign(static_cast<size_t>(k.n * k.c * k.h * k.w), 0.0);
    const std::vector<double> expected = naive.grad_input();
    for (bool streaming : {false, true}) {  // zeros through the cache or around it
      INFO((streaming ? "streaming zeros" : "cached zeros"));
      Tensor dx = full({k.n, k.h, k.w, k.c}, 123.0f);  // every element overwritten, zeros included
      cpu::strided_conv_backward_data(g, dy_nhwc.data_ptr<float>(), wt.data_ptr<float>(), dx.data_ptr<float>(),
                                      streaming);
      expect_close("backward-data kernel vs naive", values(dx.permute({0, 3, 1, 2})), expected, 2e-4, 2e-4);
    }
  }
  // Zeros stream only for a dx at least the size of the last-level cache whose pixels are whole
  // cache lines.
  CHECK(cpu::streaming_zeros_preferred(cpu::DirectConvGeometry{int64_t{1} << 20, 16, 32, 32, 32, 1, 1, 2, 2}));
  CHECK_FALSE(cpu::streaming_zeros_preferred(cpu::DirectConvGeometry{int64_t{1} << 20, 8, 32, 32, 32, 1, 1, 2, 2}));
  CHECK_FALSE(cpu::streaming_zeros_preferred(cpu::DirectConvGeometry{2, 16, 32, 32, 32, 1, 1, 2, 2}));
  CHECK(cpu::strided_conv_backward_data_preferred(
            cpu::DirectConvGeometry{int64_t{1} << 20, 16, 32, 32, 32, 1, 1, 2, 2}) == !cpu::has_avx512f());
  // Dilated or odd-channel problems, and kernels past 3x3, stay on oneDNN.
  cpu::DirectConvGeometry dilated{2, 16, 8, 8, 32, 3, 3, 2, 2, 1, 1};
  dilated.dilation_h = 2;
  CHECK_FALSE(cpu::strided_conv_backward_data_preferred(dilated));
  CHECK_FALSE(cpu::strided_conv_backward_data_preferred(cpu::DirectConvGeometry{2, 12, 8, 8, 32, 3, 3, 2, 2}));
  CHECK_FALSE(cpu::strided_conv_backward_data_preferred(cpu::DirectConvGeometry{2, 16, 8, 8, 32, 5, 5, 2, 2}));
}

// Ember's strided forward kernel on its own (the kernel table hands it only f32 3x3 strided
// problems with O % 8 == 0 on AVX2 CPUs without AVX-512): 32-lane tiles of 1-3 pixels and 16- and
// 8-lane tiles of 1-6 after them (O = 8 to 72), kernels 1-4 against strides 1-3, unequal strides,
// padding up to and past the kernel's reach (pixels no tap reaches get the bias alone), edge tiles
// whose taps only some pixels see, with and without bias, and images of one output pixel.
TEST_CASE("strided conv forward kernel: against the naive sum", "[conv]") {
  manual_seed(11);
  REQUIRE(cpu::avx2::supported());  // see the weight-gradient kernel's test
  int index = 0;
  for (const Strided& problem : {Strided{16, 32, 32, 32, 3, 3, 2, 2, 1, 1}, Strided{32, 64, 16, 16, 3, 3, 2, 2, 1, 1},
                                 Strided{3, 8, 9, 11, 3, 3, 2, 2, 1, 1}, Strided{5, 40, 13, 10, 3, 3, 3, 2, 1, 0},
                                 Strided{7, 72, 7, 7, 3, 3, 2, 3, 2, 3}, Strided{16, 24, 6, 25, 2, 4, 2, 2, 0, 1},
                                 Strided{8, 16, 5, 8, 4, 3, 3, 3, 2, 2}, Strided{9, 48, 12, 14, 3, 3, 1, 1, 1, 1},
                                 Strided{16, 8, 3, 2, 3, 3, 2, 2, 1, 1}, Strided{8, 32, 1, 1, 3, 3, 2, 2, 1, 1},
                                 Strided{4, 32, 8, 31, 1, 1, 2, 2, 0, 0}, Strided{6, 96, 10, 27, 3, 3, 2, 2, 4, 1}}) {
    Case k = problem.to_case();
    k.bias = index++ % 2 == 0;
    INFO(k.str() << (k.bias ? " with bias" : " without bias"));
    const cpu::DirectConvGeometry g = direct_geometry(k);
    const bool wanted = (k.stride_h > 1 || k.stride_w > 1) && k.kh == 3 && k.kw == 3 && k.ow() >= 8;
    CHECK(cpu::strided_conv_forward_preferred(g) == (wanted && !cpu::has_avx512f()));
    Tensor x_nhwc = randn({k.n, k.h, k.w, k.c}), wt = randn({k.o, k.c, k.kh, k.kw}), bias = randn({k.o});
    Tensor y = full({k.n, k.oh(), k.ow(), k.o}, 123.0f);  // every element overwritten
    cpu::strided_conv_forward(g, x_nhwc.data_ptr<float>(), wt.data_ptr<float>(),
                              k.bias ? bias.data_ptr<float>() : nullptr, y.data_ptr<float>());
    Naive naive{k, values(x_nhwc.permute({0, 3, 1, 2})), values(wt), {}};
    expect_close("forward kernel vs naive", values(y.permute({0, 3, 1, 2})),
                 naive.forward(k.bias ? values(bias) : std::vector<double>{}), 2e-4, 2e-4);
  }
  // Dilated problems and kernels other than 3x3 stay on oneDNN.
  cpu::DirectConvGeometry dilated{2, 16, 8, 8, 32, 3, 3, 2, 2, 1, 1};
  dilated.dilation_w = 2;
  CHECK_FALSE(cpu::strided_conv_forward_preferred(dilated));
  CHECK_FALSE(cpu::strided_conv_forward_preferred(cpu::DirectConvGeometry{2, 16, 8, 8, 32, 1, 1, 2, 2}));
  CHECK_FALSE(cpu::strided_conv_forward_preferred(cpu::DirectConvGeometry{2, 16, 8, 8, 12, 3, 3, 2, 2, 1, 1}));
}

TEST_CASE("conv2d kernels: float64 and bfloat16", "[conv]") {
  manual_seed(5);
  Case c = make_case(2, 8, 6, 7, 16, 3);
  c.pad_h = c.pad_w = 1;
  c.input = Layout::ChannelsLast;
  check(c, kFloat64);
  check(c, kBFloat16);
}

TEST_CASE("conv2d kernels: repeated and concurrent calls agree", "[conv]") {
  manual_seed(6);
  const KernelTable& table = kernels_for(Device(kCPU), "conv_test");
  ConvParams p;
  p.pad_h = p.pad_w = 1;
  Tensor x = randn({4, 16, 12, 12}), w = randn({32, 16, 3, 3});
  const std::vector<double> first = values(table.conv2d(x, w, Tensor(), p));
  CHECK(values(table.conv2d(x, w, Tensor(), p)) == first);  // served from the primitive cache
  // Threads running one cached primitive at once must not share its scratch memory (oneDNN's
  // library-managed scratchpad is one buffer per primitive): many rounds, since a race shows rarely.
  for (int round = 0; round < 50; ++round) {
    std::vector<std::vector<double>> results(4);
    std::vector<std::thread> threads;
    for (auto& r : results)
      threads.emplace_back([&] {
        for (int i = 0; i < 4; ++i) r = values(table.conv2d(x, w, Tensor(), p));
      });
    for (auto& t : threads) t.join();
    for (const auto& r : results) REQUIRE(r == first);
  }
}

// Under EMBER_KERNEL_SELECT=benchmark any candidate may win a shape, so each must match the
// references on its own: forced one at a time over layers it takes (odd sizes, non-contiguous
// layouts, strided and pointwise, with and without bias), and each that this CPU has must really
// have run.
TEST_CASE("conv2d kernels: every selectable candidate matches the references", "[conv][select]") {
  manual_seed(12);
  std::vector<Case> cases;
  for (int64_t c : {8, 16, 32})
    for (int64_t stride : {1, 2}) {
      Case k3 = make_case(3, c, 13, 11, 16, 3);
      k3.stride_h = k3.stride_w = stride, k3.pad_h = k3.pad_w = 1;
      k3.input = stride == 1 ? Layout::WidthSlice : Layout::ChannelsLast;
      cases.push_back(k3);
      Case k1 = make_case(2, c, 16, 16, 32, 1);
      k1.stride_h = k1.stride_w = stride, k1.bias = stride == 1;
      k1.grad_output = Layout::BatchSlice;
      cases.push_back(k1);
    }
  Case odd = make_case(2, 5, 9, 7, 12, 3);
  odd.pad_h = 1, odd.stride_w = 2;
  cases.push_back(odd);
  // Winograd's tiles: no padding with bias (even output), and padding 2 (odd output, wider than
  // the input), with channel counts that are not a multiple of its 32-lane register tile.
  Case unpadded = make_case(2, 24, 10, 9, 40, 3);
  unpadded.bias = true;
  cases.push_back(unpadded);
  Case wide = make_case(1, 8, 5, 6, 24, 3);
  wide.pad_h = wide.pad_w = 2;
  cases.push_back(wide);

  const bool avx2 = cpu::has_avx2_fma();
  const bool avx512 = cpu::has_avx512f();
  struct Candidate {
    const char* name;
    bool must_run;
  };
  const std::vector<Candidate> candidates = {{"onednn-nhwc", true},
                                             {"onednn-blocked", true},
                                             {"onednn-winograd", cpu::has_avx512_core()},
                                             {"ember-direct-avx512", avx512},
                                             {"ember-strided-avx2", avx2},
                                             {"ember-strided-bwd-data-avx2", avx2},
                                             {"ember-weight-grad-avx2", avx2},
                                             {"ember-winograd-avx2", avx2}};
  for (const Candidate& candidate : candidates) {
    INFO("forced kernel " << candidate.name);
    kernel_select::force(candidate.name);
    for (const Case& k : cases) check(k);
    int ran = 0;
    for (const auto& d : kernel_select::decisions()) ran += d.candidates[d.chosen] == candidate.name;
    if (candidate.must_run) CHECK(ran > 0);
  }
  kernel_select::force("");
}

// bf16 problems (autocast's) choose among oneDNN's bf16 kernels, its weight gradient split over the
// batch between threads (3 images on 2 threads: uneven shares), Ember's bf16 Winograd and the
// problem run as float32 (as-float32): each, forced, must match the references, and each this CPU has must have run.
// Without native bf16 (conv_avx2_test), oneDNN's are not candidates and as-float32 runs.
TEST_CASE("conv2d kernels: every bf16 candidate matches the references", "[conv][select]") {
  manual_seed(13);
  std::vector<Case> cases;
  Case k3 = make_case(2, 20, 9, 7, 24, 3);
  k3.pad_h = k3.pad_w = 1;
  k3.input = Layout::ChannelsLast;
  cases.push_back(k3);
  Case strided = make_case(3, 16, 11, 10, 32, 3);
  strided.stride_h = strided.stride_w = 2, strided.pad_h = 1, strided.bias = false;
  strided.grad_output = Layout::BatchSlice;
  cases.push_back(strided);
  Case odd = make_case(2, 5, 9, 7, 12, 1);
  odd.stride_w = 2, odd.input = Layout::WidthSlice;
  cases.push_back(odd);
  // Winograd's: an odd channel count (a zero partner in its channel pairs), padding 2 and 0 (odd
  // and even outputs), output channels that fill no whole vector.
  Case wino = make_case(3, 7, 6, 5, 20, 3);
  wino.pad_h = 2, wino.input = Layout::WidthSlice, wino.grad_output = Layout::BatchSlice;
  cases.push_back(wino);
  const bool native = cpu::has_native_bf16();
  for (const auto& [name, must_run] :
       std::vector<std::pair<std::string, bool>>{{"onednn-nhwc", native},
                                                 {"onednn-blocked", native},
                                                 {"as-float32", true},
                                                 {"onednn-split-batch", native && cpu::num_threads() > 1},
                                                 {"ember-winograd-bf16", native}}) {
    INFO("forced kernel " << name);
    kernel_select::reset();
    kernel_select::force(name);
    for (const Case& k : cases) check(k, kBFloat16);
    int ran = 0;
    for (const auto& d : kernel_select::decisions()) ran += d.candidates[d.chosen] == name;
    if (must_run) CHECK(ran > 0);
  }
  kernel_select::force("");
}

namespace {

// The largest |got - exact| over the root mean square of `exact`.
double error_over_rms(const std::vector<double>& got, const std::vector<double>& exact) {
  double worst = 0, squares = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - exact[i]));
    squares += exact[i] * exact[i];
  }
  return worst / std::sqrt(squares / static_cast<double>(exact.size()));
}

}  // namespace

// Ember's bf16 Winograd at the depths it is chosen for (sums over hundreds to thousands of
// products, where the case list above has tens; 2304 at 256 channels), forced, against the float64 naive sum of the same
// bf16 inputs, with a bound relative to the output's RMS: its worst element was 1.8-2.2% of it off
// (the transformed tiles and filters are rounded to bf16, and the output), oneDNN's bf16 kernels'
// 0.9-1.1% (the output's rounding alone); a wrong tap, lane or channel pair costs ~100%.
TEST_CASE("bf16 Winograd: deep layers against the naive float64 sum", "[conv]") {
  manual_seed(14);
  if (!cpu::has_native_bf16()) {
    CHECK_FALSE(cpu::winograd_bf16_applies(cpu::conv_problem(cpu::ConvPass::Forward, {1, 16, 4, 4}, {16, 16, 3, 3},
                                                             ConvParams{1, 1, 1, 1}, kBFloat16, false)));
    return;
  }
  const KernelTable& table = kernels_for(Device(kCPU), "conv_test");
  std::vector<Case> cases;
  Case deep = make_case(1, 256, 8, 8, 48, 3);  // one image: the float64 sums are this test's time
  deep.pad_h = deep.pad_w = 1, deep.input = Layout::ChannelsLast;
  cases.push_back(deep);
  Case wide = make_case(3, 67, 7, 9, 144, 3);  // 9 register-tile panels of 16-64 lanes, odd channels
  wide.pad_w = 2, wide.bias = false, wide.grad_output = Layout::WidthSlice;
  cases.push_back(wide);
  for (const Case& k : cases) {
    INFO(k.str());
    const ConvParams p = k.params();
    Tensor x = make({k.n, k.c, k.h, k.w}, k.input, kBFloat16), wt = randn({k.o, k.c, 3, 3}, kBFloat16);
    Tensor bias = k.bias ? randn({k.o}, kBFloat16) : Tensor();
    Tensor dy = make({k.n, k.o, k.oh(), k.ow()}, k.grad_output, kBFloat16);
    const Naive naive{k, values(x), values(wt), values(dy)};
    kernel_select::reset();
    kernel_select::force("ember-winograd-bf16");
    const Tensor y = table.conv2d(x, wt, bias, p);
    const Tensor dx = table.conv2d_backward_input(dy, wt, {k.n, k.c, k.h, k.w}, p);
    int ran = 0;
    for (const auto& d : kernel_select::decisions())
      ran += d.candidates[d.chosen] == std::string("ember-winograd-bf16");
    kernel_select::force("");
    CHECK(ran == 2);
    REQUIRE(y.dtype() == kBFloat16);
    CHECK(channels_last(y));
    CHECK(error_over_rms(values(y), naive.forward(k.bias ? values(bias) : std::vector<double>{})) < 0.03);
    CHECK(error_over_rms(values(dx), naive.grad_input()) < 0.03);
  }
}
