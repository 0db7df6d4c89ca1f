// conv2d forward, backward-data and backward-weight: oneDNN primitives (cached per problem) and
// Ember's own kernels, one of them chosen per pass and problem. Activations are Ember's
// channels-last (NHWC) tensors; outputs are returned channels-last; weights stay Ember's plain
// [O, C/G, KH, KW] and are reordered per call where a kernel wants another layout (they are small).
// The candidates: oneDNN's direct kernels on the NHWC memory in place; its direct kernels in the
// blocked layout it prefers, with the activations reordered into scratch and back; its Winograd
// F(4x4, 3x3) kernels for 3x3 stride-1 layers (AVX-512 CPUs); and Ember's own kernels where they
// apply (direct_conv.h, strided_conv_forward.h, strided_conv_backward_data.h,
// direct_conv_weight_grad.h). Which wins depends on the CPU's caches as much as its ISA, so by
// default each problem's first call times them all (core/kernel_select.h); the heuristic, for
// EMBER_KERNEL_SELECT=heuristic, is the rule tools/bench/conv measured on the benchmark VMs.
// Anything oneDNN rejects falls back to ember::cpu::reference.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/conv_params.h"
#include "core/cpu/conv_reference.h"
#include "core/cpu/direct_conv.h"
#include "core/cpu/direct_conv_weight_grad.h"
#include "core/cpu/dnnl/runtime.h"
#include "core/cpu/nn_kernels.h"
#include "core/cpu/strided_conv_backward_data.h"
#include "core/cpu/strided_conv_forward.h"
#include "core/cpu/avx2_tile.h"
#include "core/cpu/thread_pool.h"
#include "core/cpu/winograd_avx2.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/kernel_select.h"

namespace ember::cpu {

namespace {

using dnnl::memory;
using onednn::channels_last_strides;
using onednn::user_memory;

enum class Pass : int64_t { Forward, BackwardData, BackwardWeights };

// oneDNN's kernels as candidates: direct on Ember's NHWC memory; direct in the layout oneDNN
// prefers (blocked), with reorders in and out; Winograd (blocked too).
enum class Variant : int64_t { Nhwc, Blocked, Winograd };

// N batch, C/O input/output channels, H/W input size, KH/KW kernel, OH/OW output size.
struct Geometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow;
};

Geometry geometry(const Shape& input, const Shape& weight, const ConvParams& p) {
  Geometry g{input[0], input[1], input[2], input[3], weight[0], weight[2], weight[3], 0, 0};
  std::tie(g.oh, g.ow) = conv_output_hw(g.h, g.w, g.kh, g.kw, p);
  return g;
}

// One activation operand: Ember's NHWC layout of it (`user`), the primitive's (`desc`), and the
// reorder between them when they differ (user -> primitive for inputs, primitive -> user for
// outputs).
struct Activation {
  memory::desc user, desc;
  std::optional<onednn::Reorder> reorder;
};

// A ready-to-run primitive plus the descriptors its arguments must match. `activation_a` and
// `activation_b` are the two activation operands: (src, dst), (diff_src, diff_dst) or
// (src, diff_dst).
struct ConvPrimitive {
  dnnl::primitive conv;
  memory::desc scratchpad;  // each execution brings its own (onednn::user_scratchpad)
  Activation activation_a, activation_b;
  memory::desc weights;       // as the primitive reads (or, backward-weight, writes) them
  memory::desc user_weights;  // Ember's contiguous weight tensor
  std::optional<onednn::Reorder> weights_reorder;  // user->primitive, or primitive->user for grads
  memory::desc bias;
};

bool is_reference_impl(const char* impl) { return std::string(impl).rfind("ref", 0) == 0; }

// Winograd pays where the direct kernels are slowest relative to it: 3x3, stride 1, no dilation or
// groups, both channel counts >= 32 (at 16 channels the direct kernel wins).
// The problems oneDNN's Winograd kernels take: float32 3x3, stride 1, no dilation or groups.
bool winograd_shape(const Geometry& g, const ConvParams& p, memory::data_type type) {
  return type == memory::data_type::f32 && g.kh == 3 && g.kw == 3 && p.stride_h == 1 && p.stride_w == 1 &&
         p.dilation_h == 1 && p.dilation_w == 1 && p.groups == 1;
}

bool wants_winograd(const Geometry& g, const ConvParams& p, memory::data_type type) {
  return winograd_shape(g, p, type) && g.c >= 32 && g.o >= 32;
}

// The operand as the primitive wants it; `user` is Ember's NHWC layout, `input` the direction.
Activation activation(const memory::desc& wanted, const memory::desc& user, bool input) {
  Activation a{user, wanted, std::nullopt};
  if (wanted != user) a.reorder = input ? onednn::make_reorder(user, wanted) : onednn::make_reorder(wanted, user);
  return a;
}

// Builds the primitive for one problem; nullptr when oneDNN refuses it or only offers its slow
// reference kernel (Ember's im2col path is faster than that).
std::shared_ptr<const ConvPrimitive> create(Pass pass, const Geometry& g, const ConvParams& p,
                                            memory::data_type type, bool with_bias, Variant variant) {
  const bool winograd = variant == Variant::Winograd, any_layout = variant != Variant::Nhwc;
  using tag = memory::format_tag;
  const memory::desc user_src({g.n, g.c, g.h, g.w}, type, tag::nhwc);
  const memory::desc user_dst({g.n, g.o, g.oh, g.ow}, type, tag::nhwc);
  // Winograd and the blocked variant pick their own activation layout; Nhwc takes Ember's as it is.
  const memory::desc src = any_layout ? memory::desc({g.n, g.c, g.h, g.w}, type, tag::any) : user_src;
  const memory::desc dst = any_layout ? memory::desc({g.n, g.o, g.oh, g.ow}, type, tag::any) : user_dst;
  const memory::dims weight_dims = p.groups == 1
                                       ? memory::dims{g.o, g.c, g.kh, g.kw}
                                       : memory::dims{p.groups, g.o / p.groups, g.c / p.groups, g.kh, g.kw};
  const memory::desc any_weights(weight_dims, type, tag::any);
  const memory::desc user_weights(weight_dims, type, p.groups == 1 ? tag::oihw : tag::goihw);
  const memory::desc bias = with_bias ? memory::desc({g.o}, type, tag::x) : memory::desc();
  // oneDNN counts dilation from 0 (dense kernel), Ember from 1.
  const memory::dims strides{p.stride_h, p.stride_w}, dilates{p.dilation_h - 1, p.dilation_w - 1};
  const memory::dims padding{p.pad_h, p.pad_w};
  const auto algo = winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
  const dnnl::engine& engine = onednn::engine();

  auto result = std::make_shared<ConvPrimitive>();
  result->user_weights = user_weights;
  result->bias = bias;
  const bool pass_with_bias = with_bias && pass != Pass::BackwardData;
  const dnnl::primitive_attr attr = onednn::user_scratchpad();
  dnnl::convolution_forward::primitive_desc forward(
      {dnnl::prop_kind::forward_training, algo, src, any_weights, pass == Pass::Forward ? bias : memory::desc(), dst,
       strides, dilates, padding, padding},
      attr, engine);
  if (pass == Pass::Forward) {
    if (is_reference_impl(forward.impl_info_str())) return nullptr;
    result->conv = dnnl::convolution_forward(forward);
    result->scratchpad = forward.scratchpad_desc();
    result->activation_a = activation(forward.src_desc(), user_src, true);
    result->activation_b = activation(forward.dst_desc(), user_dst, false);
    result->weights = forward.weights_desc();
  } else if (pass == Pass::BackwardData) {
    dnnl::convolution_backward_data::primitive_desc backward(
        {algo, src, any_weights, dst, strides, dilates, padding, padding}, attr, engine, forward);
    if (is_reference_impl(backward.impl_info_str())) return nullptr;
    result->conv = dnnl::convolution_backward_data(backward);
    result->scratchpad = backward.scratchpad_desc();
    result->activation_a = activation(backward.diff_src_desc(), user_src, false);
    result->activation_b = activation(backward.diff_dst_desc(), user_dst, true);
    result->weights = backward.weights_desc();
  } else {
    dnnl::convolution_backward_weights::primitive_desc backward(
        {algo, src, any_weights, pass_with_bias ? bias : memory::desc(), dst, strides, dilates, padding, padding},
        attr, engine, forward);
    if (is_reference_impl(backward.impl_info_str())) return nullptr;
    result->conv = dnnl::convolution_backward_weights(backward);
    result->scratchpad = backward.scratchpad_desc();
    result->activation_a = activation(backward.src_desc(), user_src, true);
    result->activation_b = activation(backward.diff_dst_desc(), user_dst, true);
    result->weights = backward.diff_weights_desc();
  }
  // A blocked variant that chose NHWC after all is the Nhwc candidate again.
  if (variant == Variant::Blocked && !result->activation_a.reorder && !result->activation_b.reorder) return nullptr;
  if (result->weights != user_weights) {
    result->weights_reorder = pass == Pass::BackwardWeights ? onednn::make_reorder(result->weights, user_weights)
                                                            : onednn::make_reorder(user_weights, result->weights);
  }
  return result;
}

// Primitives by problem and variant; nullptr (remembered) where oneDNN has none but its reference
// kernel. Activation layouts are not part of the key because Ember's are always NHWC (callers
// convert first) and weights always Ember's plain layout; dtype and bias complete it.
std::shared_ptr<const ConvPrimitive> lookup(Pass pass, const Geometry& g, const ConvParams& p, DType dtype,
                                            memory::data_type type, bool with_bias, Variant variant) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::shared_ptr<const ConvPrimitive>> cache;
  std::vector<int64_t> key = {static_cast<int64_t>(pass), static_cast<int64_t>(variant), static_cast<int64_t>(dtype),
                              with_bias, g.n, g.c, g.h, g.w, g.o, g.kh, g.kw,
                              p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, p.groups};
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  std::shared_ptr<const ConvPrimitive> made;
  try {
    made = create(pass, g, p, type, with_bias, variant);
  } catch (const dnnl::error&) {
    made = nullptr;  // unimplemented for this problem: remembered, so we ask oneDNN only once
  }
  cache.emplace(std::move(key), made);
  return made;
}

// Runs the convolution with a scratchpad of its own, turning a oneDNN failure into an ember::Error
// that names the op.
void execute(const char* op, const ConvPrimitive& prim, dnnl::stream& stream, std::unordered_map<int, memory> args) {
  Tensor scratch;
  if (prim.scratchpad.get_size() > 0) {
    scratch = onednn::scratch_for(prim.scratchpad);
    args.emplace(DNNL_ARG_SCRATCHPAD, user_memory(prim.scratchpad, scratch));
  }
  try {
    onednn::SignalsHeld held;
    prim.conv.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    EMBER_FAIL(op, ": oneDNN execution failed (status ", static_cast<int>(e.status), "): ", e.what());
  }
}

// The weights as the primitive reads them: Ember's memory directly, or a reordered scratch copy.
memory weights_for(const ConvPrimitive& prim, const Tensor& weight, Tensor* scratch) {
  memory user = user_memory(prim.user_weights, weight);
  if (!prim.weights_reorder) return user;
  *scratch = onednn::scratch_for(prim.weights);
  memory blocked = user_memory(prim.weights, *scratch);
  onednn::execute(*prim.weights_reorder, user, blocked, true);
  return blocked;
}

// An input activation as the primitive reads it: the tensor's memory, or a reordered scratch copy.
memory input_for(const Activation& a, const Tensor& t, Tensor* scratch) {
  if (!a.reorder) return user_memory(a.desc, t);
  *scratch = onednn::scratch_for(a.desc);
  memory wanted = user_memory(a.desc, *scratch);
  memory from = user_memory(a.user, t);
  onednn::execute(*a.reorder, from, wanted);
  return wanted;
}

// Where the primitive writes an output activation: the tensor itself, or scratch that
// finish_output() reorders into it.
memory output_for(const Activation& a, const Tensor& t, Tensor* scratch) {
  if (!a.reorder) return user_memory(a.desc, t);
  *scratch = onednn::scratch_for(a.desc);
  return user_memory(a.desc, *scratch);
}

void finish_output(const Activation& a, memory& written, const Tensor& t) {
  if (!a.reorder) return;
  memory to = user_memory(a.user, t);
  onednn::execute(*a.reorder, written, to);
}

std::optional<memory::data_type> fast_type(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.numel() == 0 || b.numel() == 0) return std::nullopt;
  return onednn::data_type(a.dtype());
}

Tensor empty_channels_last(const Shape& shape, const TensorOptions& options) {
  return empty_strided(shape, channels_last_strides(shape), options);
}

// The problem as Ember's own kernels see it (core/cpu/direct_conv.h), if it is one they can take:
// float32, ungrouped, non-empty.
std::optional<DirectConvGeometry> direct_geometry(DType dtype, const Shape& input, const Shape& weight,
                                                  const ConvParams& p) {
  if (dtype != kFloat32 || p.groups != 1) return std::nullopt;
  DirectConvGeometry g{input[0], input[1], input[2], input[3], weight[0], weight[2], weight[3]};
  if (g.n == 0 || g.c == 0 || g.h == 0 || g.w == 0 || g.o == 0 || g.kh == 0 || g.kw == 0) return std::nullopt;
  g.stride_h = p.stride_h, g.stride_w = p.stride_w, g.pad_h = p.pad_h, g.pad_w = p.pad_w;
  g.dilation_h = p.dilation_h, g.dilation_w = p.dilation_w;
  return g;
}

// ---- The candidates of each pass and the choice among them ----

// Ember's own kernels as candidates (core/cpu/direct_conv.h and the AVX2 ones).
enum class Own { None, Direct, StridedForward, StridedBackwardData, WeightGrad, Winograd };

// One way to run a pass: one of Ember's kernels, or a oneDNN primitive.
struct Option {
  Own own = Own::None;
  Variant variant = Variant::Nhwc;
  std::shared_ptr<const ConvPrimitive> prim;
  std::string name() const {
    switch (own) {
      case Own::Direct: return "ember-direct-avx512";
      case Own::StridedForward: return "ember-strided-avx2";
      case Own::StridedBackwardData: return "ember-strided-bwd-data-avx2";
      case Own::WeightGrad: return "ember-weight-grad-avx2";
      case Own::Winograd: return "ember-winograd-avx2";
      case Own::None: break;
    }
    return variant == Variant::Nhwc ? "onednn-nhwc" : variant == Variant::Blocked ? "onednn-blocked" : "onednn-winograd";
  }
};

// One pass of one problem, as the choice sees it.
struct Problem {
  Pass pass;
  Geometry g;
  ConvParams p;
  DType dtype;
  memory::data_type type;
  bool with_bias;
  std::optional<DirectConvGeometry> own;  // Ember's view of it, when float32 and ungrouped

  std::string key() const {
    static const char* passes[] = {"fwd", "bwd_data", "bwd_weight"};
    std::ostringstream k;
    k << "conv2d " << passes[static_cast<int>(pass)] << " " << dtype_name(dtype) << " x=" << g.n << "x" << g.c << "x"
      << g.h << "x" << g.w << " w=" << g.o << "x" << g.c / p.groups << "x" << g.kh << "x" << g.kw << " s=" << p.stride_h
      << "x" << p.stride_w << " p=" << p.pad_h << "x" << p.pad_w << " d=" << p.dilation_h << "x" << p.dilation_w
      << " g=" << p.groups << (with_bias ? " bias" : "") << " threads=" << num_threads();
    return k.str();
  }
  std::shared_ptr<const ConvPrimitive> primitive(Variant v) const {
    return lookup(pass, g, p, dtype, type, with_bias, v);
  }
};

bool undilated(const DirectConvGeometry& g) { return g.dilation_h == 1 && g.dilation_w == 1; }

// Which of Ember's kernels can take the pass at all (each header's requirements, narrowed to the
// layer kinds each was written for, so that trials stay few). The "strided" kernels take any
// stride: with the ISA capped to AVX2 (Zen 4), ember-strided-avx2 beat oneDNN on ResNet-20's
// stride-1 16->16 layers (1.30x) and lost on wider ones, which trials sort out per shape.
std::vector<Own> own_candidates(const Problem& pr) {
  std::vector<Own> out;
  if (!pr.own) return out;
  const DirectConvGeometry& g = *pr.own;
  switch (pr.pass) {
    case Pass::Forward:
      if (direct_conv_supported() && g.kh == 1 && g.kw == 1 && g.pad_h == 0 && g.pad_w == 0) out.push_back(Own::Direct);
      if (avx2::supported() && undilated(g) && g.kh == 3 && g.kw == 3 && g.o % 8 == 0)
        out.push_back(Own::StridedForward);
      if (winograd_avx2_applies(g)) out.push_back(Own::Winograd);
      break;
    case Pass::BackwardData:
      if (avx2::supported() && undilated(g) && g.kh <= 3 && g.kw <= 3 && g.c % 8 == 0)
        out.push_back(Own::StridedBackwardData);
      if (winograd_avx2_applies(g)) out.push_back(Own::Winograd);
      break;
    case Pass::BackwardWeights:
      if (avx2::supported() && (g.c % 8 == 0 || g.o % 8 == 0)) out.push_back(Own::WeightGrad);
      break;
  }
  return out;
}

// The fixed rules measured on the benchmark VMs (each kernel's *_preferred), for
// EMBER_KERNEL_SELECT=heuristic and as the choice when no trial succeeds.
Option heuristic_option(const Problem& pr) {
  if (pr.own) {
    const DirectConvGeometry& g = *pr.own;
    if (pr.pass == Pass::Forward && direct_conv_preferred(g)) return {Own::Direct};
    if (pr.pass == Pass::Forward && strided_conv_forward_preferred(g)) return {Own::StridedForward};
    if (pr.pass == Pass::BackwardData && strided_conv_backward_data_preferred(g)) return {Own::StridedBackwardData};
    if (pr.pass == Pass::BackwardWeights && direct_conv_weight_grad_preferred(g)) return {Own::WeightGrad};
  }
  if (wants_winograd(pr.g, pr.p, pr.type))
    if (auto prim = pr.primitive(Variant::Winograd)) return {Own::None, Variant::Winograd, prim};
  return {Own::None, Variant::Nhwc, pr.primitive(Variant::Nhwc)};  // prim null: the reference kernel
}

// Every candidate for the pass, the heuristic's among them.
std::vector<Option> all_options(const Problem& pr) {
  std::vector<Option> out;
  for (Own own : own_candidates(pr)) out.push_back({own});
  for (Variant v : {Variant::Nhwc, Variant::Blocked, Variant::Winograd}) {
    if (v == Variant::Winograd && !winograd_shape(pr.g, pr.p, pr.type)) continue;
    if (auto prim = pr.primitive(v)) out.push_back({Own::None, v, prim});
  }
  return out;
}

// The option for the pass: the heuristic's, or the fastest of all_options() measured on the
// caller's data by `trial`, decided once per key (core/kernel_select.h).
Option select(const Problem& pr, const std::string& key, const std::function<void(const Option&)>& trial) {
  static kernel_select::Memo<Option> chosen;
  if (auto found = chosen.find(key)) return *found;
  Option heuristic = heuristic_option(pr);
  std::vector<Option> options = {heuristic};
  if (kernel_select::may_differ_from_heuristic()) {
    std::vector<Option> all = all_options(pr);
    if (!all.empty()) options = all;
  }
  std::vector<std::string> names;
  int heuristic_index = 0;
  for (const Option& o : options) {
    if (o.name() == heuristic.name()) heuristic_index = static_cast<int>(names.size());
    names.push_back(o.name());
  }
  const int index = kernel_select::choose(key, names, heuristic_index, [&](int i) { trial(options[i]); });
  return chosen.store(key, options[index]);
}

// ---- Running one option ----

Tensor forward_with(const Option& o, const Problem& pr, const Tensor& input, const Tensor& weight, const Tensor& bias) {
  NoGradGuard no_grad;
  const Geometry& g = pr.g;
  Tensor b = bias.defined() ? bias.to(input.dtype()).contiguous() : Tensor();
  if (o.own != Own::None) {
    Tensor x = onednn::to_channels_last(input), w = weight.contiguous();
    Tensor y = empty_channels_last({g.n, g.o, g.oh, g.ow}, input.options());
    const float* b_data = b.defined() ? b.data_ptr<float>() : nullptr;
    if (o.own == Own::Direct)
      direct_conv_forward(*pr.own, x.data_ptr<float>(), w.data_ptr<float>(), b_data, y.data_ptr<float>());
    else if (o.own == Own::Winograd)
      winograd_avx2_forward(*pr.own, x.data_ptr<float>(), w.data_ptr<float>(), b_data, y.data_ptr<float>());
    else
      strided_conv_forward(*pr.own, x.data_ptr<float>(), w.data_ptr<float>(), b_data, y.data_ptr<float>());
    return y;
  }
  if (!o.prim) return reference::conv2d(input, weight, bias, pr.p);
  const ConvPrimitive& prim = *o.prim;
  Tensor x = onednn::to_channels_last(input), w = weight.contiguous();
  Tensor y = empty_channels_last({g.n, g.o, g.oh, g.ow}, input.options());
  dnnl::stream& stream = onednn::stream();
  Tensor weight_scratch, x_scratch, y_scratch;
  memory out = output_for(prim.activation_b, y, &y_scratch);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, input_for(prim.activation_a, x, &x_scratch)},
                                          {DNNL_ARG_WEIGHTS, weights_for(prim, w, &weight_scratch)},
                                          {DNNL_ARG_DST, out}};
  if (b.defined()) args.emplace(DNNL_ARG_BIAS, user_memory(prim.bias, b));
  execute("conv2d", prim, stream, args);
  finish_output(prim.activation_b, out, y);
  return y;
}

Tensor backward_data_with(const Option& o, const Problem& pr, const Tensor& grad_output, const Tensor& weight,
                          const Shape& input_shape) {
  NoGradGuard no_grad;
  if (o.own != Own::None) {
    Tensor dy = onednn::to_channels_last(grad_output), w = weight.contiguous();
    Tensor dx = empty_channels_last(input_shape, grad_output.options());
    if (o.own == Own::Winograd)
      winograd_avx2_backward_data(*pr.own, dy.data_ptr<float>(), w.data_ptr<float>(), dx.data_ptr<float>());
    else
      strided_conv_backward_data(*pr.own, dy.data_ptr<float>(), w.data_ptr<float>(), dx.data_ptr<float>());
    return dx;
  }
  if (!o.prim) return reference::conv2d_backward_input(grad_output, weight, input_shape, pr.p);
  const ConvPrimitive& prim = *o.prim;
  Tensor dy = onednn::to_channels_last(grad_output), w = weight.contiguous();
  Tensor dx = empty_channels_last(input_shape, grad_output.options());
  dnnl::stream& stream = onednn::stream();
  Tensor weight_scratch, dx_scratch, dy_scratch;
  memory out = output_for(prim.activation_a, dx, &dx_scratch);
  execute("conv2d_backward_input", prim, stream,
          {{DNNL_ARG_DIFF_SRC, out},
           {DNNL_ARG_WEIGHTS, weights_for(prim, w, &weight_scratch)},
           {DNNL_ARG_DIFF_DST, input_for(prim.activation_b, dy, &dy_scratch)}});
  finish_output(prim.activation_a, out, dx);
  return dx;
}

std::pair<Tensor, Tensor> backward_weight_with(const Option& o, const Problem& pr, const Tensor& grad_output,
                                               const Tensor& input, const Shape& weight_shape, bool want_bias) {
  NoGradGuard no_grad;
  if (o.own != Own::None) {
    Tensor x = onednn::to_channels_last(input), dy = onednn::to_channels_last(grad_output);
    Tensor grad_weight = empty(weight_shape, input.options());
    direct_conv_weight_grad(*pr.own, x.data_ptr<float>(), dy.data_ptr<float>(), grad_weight.data_ptr<float>());
    // The bias gradient is dy summed over every pixel: a sum over N, H and W of the logical tensor.
    Tensor grad_bias = want_bias ? dy.sum({0, 2, 3}) : Tensor();
    return {grad_weight, grad_bias};
  }
  if (!o.prim) return reference::conv2d_backward_weight(grad_output, input, weight_shape, want_bias, pr.p);
  const ConvPrimitive& prim = *o.prim;
  Tensor x = onednn::to_channels_last(input), dy = onednn::to_channels_last(grad_output);
  Tensor grad_weight = empty(weight_shape, input.options());
  Tensor grad_bias = want_bias ? empty({pr.g.o}, input.options()) : Tensor();
  dnnl::stream& stream = onednn::stream();
  // The primitive writes the gradient in its own layout; a reorder brings it to Ember's.
  Tensor weight_scratch = prim.weights_reorder ? onednn::scratch_for(prim.weights) : grad_weight;
  memory written = user_memory(prim.weights, weight_scratch);
  Tensor x_scratch, dy_scratch;
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, input_for(prim.activation_a, x, &x_scratch)},
                                          {DNNL_ARG_DIFF_DST, input_for(prim.activation_b, dy, &dy_scratch)},
                                          {DNNL_ARG_DIFF_WEIGHTS, written}};
  if (want_bias) args.emplace(DNNL_ARG_DIFF_BIAS, user_memory(prim.bias, grad_bias));
  execute("conv2d_backward_weight", prim, stream, args);
  if (prim.weights_reorder) {
    memory user = user_memory(prim.user_weights, grad_weight);
    onednn::execute(*prim.weights_reorder, written, user, true);
  }
  return {grad_weight, grad_bias};
}

Problem problem(Pass pass, const Shape& input_shape, const Shape& weight_shape, const ConvParams& p, DType dtype,
                memory::data_type type, bool with_bias) {
  return {pass, geometry(input_shape, weight_shape, p), p, dtype, type, with_bias,
          direct_geometry(dtype, input_shape, weight_shape, p)};
}

}  // namespace

Tensor conv2d_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p) {
  const auto type = fast_type(input, weight);
  if (!type) return reference::conv2d(input, weight, bias, p);
  const Problem pr = problem(Pass::Forward, input.sizes(), weight.sizes(), p, input.dtype(), *type, bias.defined());
  const std::string key = pr.key();
  const Option o = select(pr, key, [&](const Option& c) { forward_with(c, pr, input, weight, bias); });
  kernel_select::Timer timer(key);
  return forward_with(o, pr, input, weight, bias);
}

Tensor conv2d_backward_input_kernel(const Tensor& grad_output, const Tensor& weight, const Shape& input_shape,
                                    const ConvParams& p) {
  const auto type = fast_type(grad_output, weight);
  if (!type) return reference::conv2d_backward_input(grad_output, weight, input_shape, p);
  const Problem pr = problem(Pass::BackwardData, input_shape, weight.sizes(), p, grad_output.dtype(), *type, false);
  const std::string key = pr.key();
  const Option o =
      select(pr, key, [&](const Option& c) { backward_data_with(c, pr, grad_output, weight, input_shape); });
  kernel_select::Timer timer(key);
  return backward_data_with(o, pr, grad_output, weight, input_shape);
}

std::pair<Tensor, Tensor> conv2d_backward_weight_kernel(const Tensor& grad_output, const Tensor& input,
                                                        const Shape& weight_shape, bool want_bias,
                                                        const ConvParams& p) {
  const auto type = fast_type(grad_output, input);
  if (!type) return reference::conv2d_backward_weight(grad_output, input, weight_shape, want_bias, p);
  const Problem pr = problem(Pass::BackwardWeights, input.sizes(), weight_shape, p, input.dtype(), *type, want_bias);
  const std::string key = pr.key();
  const Option o = select(pr, key, [&](const Option& c) {
    backward_weight_with(c, pr, grad_output, input, weight_shape, want_bias);
  });
  kernel_select::Timer timer(key);
  return backward_weight_with(o, pr, grad_output, input, weight_shape, want_bias);
}

}  // namespace ember::cpu
