// Convolution benchmark: every distinct conv layer of a CIFAR ResNet-20 at batch 128 (plus the
// option-B 1x1 projection shortcuts), fp32, through Ember's kernel-table entries from tensors in
// the layout a channels-last network has, next to oneDNN's own best (formats `any`, only execute()).
//
//   bazel run --config=bench //tools/bench:conv [-- reps rounds [filter]]
//
// `filter` keeps only the passes whose "shape pass" text contains it (e.g. bwd_weight).
//
// GFLOP/s counts 2 * N * O * OH * OW * (C / groups) * KH * KW per pass (forward, backward-data
// and backward-weight alike). Each side runs in its own block of 2 x `reps` calls (the first
// `reps` untimed, to warm its data back into cache), the blocks alternate for `rounds` rounds, and
// each side reports the median of all its timed calls. The ratio is
// Ember / oneDNN-best; the oneDNN-nhwc column (oneDNN alone, activations pinned to NHWC) tells
// how much of a gap is the layout rather than Ember's wrapping.
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/conv_params.h"
#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"

namespace {

using namespace ember;
using dnnl::memory;

constexpr int kThreads = 2;
constexpr int64_t kBatch = 128;

struct Layer {
  const char* name;
  int64_t c, hw, o, k, stride, pad;
  int64_t out() const { return conv_output_size(hw, k, stride, pad, 1); }
  double flops() const { return 2.0 * kBatch * o * out() * out() * c * k * k; }
};

const Layer kLayers[] = {
    {"stem 3->16 3x3 32", 3, 32, 16, 3, 1, 1},     {"16->16 3x3 32", 16, 32, 16, 3, 1, 1},
    {"16->32 3x3 s2 32->16", 16, 32, 32, 3, 2, 1}, {"32->32 3x3 16", 32, 16, 32, 3, 1, 1},
    {"32->64 3x3 s2 16->8", 32, 16, 64, 3, 2, 1},  {"64->64 3x3 8", 64, 8, 64, 3, 1, 1},
    {"16->32 1x1 s2 32->16", 16, 32, 32, 1, 2, 0}, {"32->64 1x1 s2 16->8", 32, 16, 64, 1, 2, 0},
};

enum Pass { kForward, kBackwardData, kBackwardWeight };
const char* kPassNames[] = {"fwd", "bwd_data", "bwd_weight"};

double seconds_of(const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A random tensor whose memory is NHWC (logical NCHW), as a channels-last network holds it.
Tensor channels_last_randn(int64_t n, int64_t c, int64_t h, int64_t w) {
  return randn({n, h, w, c}).permute({0, 3, 1, 2});
}

// oneDNN alone on one pass: weights (and activations, unless pinned) in formats oneDNN chooses,
// buffers already in them, only execute() timed.
struct OneDnnPass {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::primitive primitive;
  std::unordered_map<int, memory> args;
  std::string impl;

  // `activations`: any (oneDNN's choice) or nhwc (the layout Ember's path hands oneDNN).
  OneDnnPass(const Layer& l, Pass pass, memory::format_tag activations) {
    using tag = memory::format_tag;
    const auto f32 = memory::data_type::f32;
    const memory::desc src({kBatch, l.c, l.hw, l.hw}, f32, activations);
    const memory::desc dst({kBatch, l.o, l.out(), l.out()}, f32, activations);
    const memory::desc weights({l.o, l.c, l.k, l.k}, f32, tag::any);
    const memory::dims strides{l.stride, l.stride}, dilates{0, 0}, padding{l.pad, l.pad};
    const auto algo = dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::primitive_desc forward(
        {dnnl::prop_kind::forward_training, algo, src, weights, dst, strides, dilates, padding, padding}, engine);
    if (pass == kForward) {
      primitive = dnnl::convolution_forward(forward);
      impl = forward.impl_info_str();
      args = {{DNNL_ARG_SRC, filled(forward.src_desc())},
              {DNNL_ARG_WEIGHTS, filled(forward.weights_desc())},
              {DNNL_ARG_DST, filled(forward.dst_desc())}};
    } else if (pass == kBackwardData) {
      dnnl::convolution_backward_data::primitive_desc pd({algo, src, weights, dst, strides, dilates, padding, padding},
                                                         engine, forward);
      primitive = dnnl::convolution_backward_data(pd);
      impl = pd.impl_info_str();
      args = {{DNNL_ARG_DIFF_SRC, filled(pd.diff_src_desc())},
              {DNNL_ARG_WEIGHTS, filled(pd.weights_desc())},
              {DNNL_ARG_DIFF_DST, filled(pd.diff_dst_desc())}};
    } else {
      dnnl::convolution_backward_weights::primitive_desc pd(
          {algo, src, weights, dst, strides, dilates, padding, padding}, engine, forward);
      primitive = dnnl::convolution_backward_weights(pd);
      impl = pd.impl_info_str();
      args = {{DNNL_ARG_SRC, filled(pd.src_desc())},
              {DNNL_ARG_DIFF_WEIGHTS, filled(pd.diff_weights_desc())},
              {DNNL_ARG_DIFF_DST, filled(pd.diff_dst_desc())}};
    }
  }
  memory filled(const memory::desc& desc) {
    memory m(desc, engine);
    float* data = static_cast<float*>(m.get_data_handle());
    for (size_t i = 0; i < desc.get_size() / sizeof(float); ++i) data[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
    return m;
  }
  void run() {
    primitive.execute(stream, args);
    stream.wait();
  }
};

// Ember's side of one pass: the kernel-table call a training step makes.
std::function<void()> ember_pass(const Layer& l, Pass pass) {
  const KernelTable& table = kernels_for(Device(kCPU), "bench conv");
  ConvParams p;
  p.stride_h = p.stride_w = l.stride;
  p.pad_h = p.pad_w = l.pad;
  // Every layer reads a channels-last tensor: the stem the batch a channels_last(true) DataLoader
  // hands over (what tools/train uses), the others the activations a channels-last network holds.
  Tensor x = channels_last_randn(kBatch, l.c, l.hw, l.hw);
  Tensor w = randn({l.o, l.c, l.k, l.k});
  Tensor dy = channels_last_randn(kBatch, l.o, l.out(), l.out());
  switch (pass) {
    case kForward:
      return [=, &table] { table.conv2d(x, w, Tensor(), p); };
    case kBackwardData:
      return [=, &table] { table.conv2d_backward_input(dy, w, x.sizes(), p); };
    case kBackwardWeight:
      return [=, &table] { table.conv2d_backward_weight(dy, x, w.sizes(), false, p); };
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const std::string filter = argc > 3 ? argv[3] : "";
  cpu::set_num_threads(kThreads);
  omp_set_num_threads(kThreads);
  manual_seed(0);
  std::printf("conv benchmark: CIFAR ResNet-20 layers, batch %lld, fp32, %d threads, median of %d x %d warm calls\n",
              static_cast<long long>(kBatch), kThreads, rounds, reps);
  std::printf("%-22s %-10s %8s %8s %6s %12s  %s\n", "shape", "pass", "Ember", "oneDNN", "ratio", "oneDNN-nhwc",
              "oneDNN impl (any / nhwc)");
  double worst = 1e9;
  for (const Layer& layer : kLayers)
    for (Pass pass : {kForward, kBackwardData, kBackwardWeight}) {
      if ((std::string(layer.name) + " " + kPassNames[pass]).find(filter) == std::string::npos) continue;
      std::function<void()> ember = ember_pass(layer, pass);
      OneDnnPass best(layer, pass, memory::format_tag::any), nhwc(layer, pass, memory::format_tag::nhwc);
      for (int i = 0; i < 3; ++i) ember(), best.run(), nhwc.run();  // primitives, caches and pages warm
      std::vector<double> ember_times, best_times, nhwc_times;
      // The three sides' buffers (36 MB on the largest layers) do not fit this VM's share of the
      // L3 together: after a switch, a side's calls slow down for several calls while its data
      // comes back (one 0.2 ms pass took 0.6 ms, then 0.45, 0.4, ... 0.2). Each block's first
      // `reps` calls warm up and only the next `reps` are timed, on every side alike.
      auto block = [reps](std::vector<double>& times, const std::function<void()>& call) {
        for (int i = 0; i < reps; ++i) call();
        for (int i = 0; i < reps; ++i) times.push_back(seconds_of(call));
      };
      for (int round = 0; round < rounds; ++round) {
        block(ember_times, ember);
        block(best_times, [&] { best.run(); });
        block(nhwc_times, [&] { nhwc.run(); });
      }
      const double ember_gflops = layer.flops() / median(ember_times) / 1e9;
      const double best_gflops = layer.flops() / median(best_times) / 1e9;
      const double nhwc_gflops = layer.flops() / median(nhwc_times) / 1e9;
      const double ratio = ember_gflops / best_gflops;
      worst = std::min(worst, ratio);
      std::printf("%-22s %-10s %8.1f %8.1f %6.2f %12.1f  %s / %s\n", layer.name, kPassNames[pass], ember_gflops,
                  best_gflops, ratio, nhwc_gflops, best.impl.c_str(), nhwc.impl.c_str());
      std::fflush(stdout);
    }
  std::printf("bench conv: conv_vs_onednn_min=%.2f\n", worst);
  return 0;
}
