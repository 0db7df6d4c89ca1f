// oneDNN's convolution primitives (onednn_conv.h): made once per problem and variant, cached, and
// run on Ember's NHWC activations, with reorders where a primitive wants another layout.
#include "core/cpu/conv/onednn_conv.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cpu/dnnl/runtime.h"
#include "core/cpu/thread_pool.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::cpu::onednn {

using dnnl::memory;

// One activation operand: Ember's NHWC layout of it (`user`), the primitive's (`desc`), and the
// reorder between them when they differ (user -> primitive for inputs, primitive -> user for
// outputs).
struct ConvActivation {
  memory::desc user, desc;
  std::optional<Reorder> reorder;
};

// A ready-to-run primitive plus the descriptors its arguments must match. `activation_a` and
// `activation_b` are the two activation operands: (src, dst), (diff_src, diff_dst) or
// (src, diff_dst).
struct ConvPrimitive {
  dnnl::primitive conv;
  memory::desc scratchpad;  // each execution brings its own (user_scratchpad)
  ConvActivation activation_a, activation_b;
  memory::desc weights;                    // as the primitive reads (or, backward-weight, writes) them
  memory::desc user_weights;               // Ember's contiguous weight tensor
  std::optional<Reorder> weights_reorder;  // user->primitive, or primitive->user for grads
  memory::desc bias;
};

namespace {

bool is_reference_impl(const char* impl) { return std::string(impl).rfind("ref", 0) == 0; }

// The operand as the primitive wants it; `user` is Ember's NHWC layout, `input` the direction.
ConvActivation activation(const memory::desc& wanted, const memory::desc& user, bool input) {
  ConvActivation a{user, wanted, std::nullopt};
  if (wanted != user) a.reorder = input ? make_reorder(user, wanted) : make_reorder(wanted, user);
  return a;
}

// Builds the primitive for one problem; nullptr when oneDNN refuses it or only offers its slow
// reference kernel (Ember's im2col path is faster than that).
std::shared_ptr<const ConvPrimitive> create(ConvPass pass, const ConvSizes& g, const ConvParams& p,
                                            memory::data_type type, bool with_bias, ConvVariant variant) {
  const bool winograd = variant == ConvVariant::Winograd;
  const bool any_layout = variant == ConvVariant::Blocked || winograd;
  const bool float32_weights = variant == ConvVariant::NhwcFloat32Weights;
  if (float32_weights && pass != ConvPass::BackwardWeights) return nullptr;
  using tag = memory::format_tag;
  const memory::desc user_src({g.n, g.c, g.h, g.w}, type, tag::nhwc);
  const memory::desc user_dst({g.n, g.o, g.oh, g.ow}, type, tag::nhwc);
  // Winograd and the blocked variant pick their own activation layout; Nhwc takes Ember's as it is.
  const memory::desc src = any_layout ? memory::desc({g.n, g.c, g.h, g.w}, type, tag::any) : user_src;
  const memory::desc dst = any_layout ? memory::desc({g.n, g.o, g.oh, g.ow}, type, tag::any) : user_dst;
  const memory::dims weight_dims = p.groups == 1 ? memory::dims{g.o, g.c, g.kh, g.kw}
                                                 : memory::dims{p.groups, g.o / p.groups, g.c / p.groups, g.kh, g.kw};
  // The forward (a hint for the backward passes) reads weights of the activations' type.
  const memory::data_type weights_type = float32_weights ? memory::data_type::f32 : type;
  const memory::desc forward_weights(weight_dims, type, tag::any);
  const memory::desc any_weights(weight_dims, weights_type, tag::any);
  const memory::desc user_weights(weight_dims, weights_type, p.groups == 1 ? tag::oihw : tag::goihw);
  const memory::desc bias = with_bias ? memory::desc({g.o}, weights_type, tag::x) : memory::desc();
  const memory::desc forward_bias = with_bias ? memory::desc({g.o}, type, tag::x) : memory::desc();
  // oneDNN counts dilation from 0 (dense kernel), Ember from 1.
  const memory::dims strides{p.stride_h, p.stride_w}, dilates{p.dilation_h - 1, p.dilation_w - 1};
  const memory::dims padding{p.pad_h, p.pad_w};
  const auto algo = winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
  const dnnl::engine& engine = onednn::engine();

  auto result = std::make_shared<ConvPrimitive>();
  result->user_weights = user_weights;
  result->bias = bias;
  const bool pass_with_bias = with_bias && pass != ConvPass::BackwardData;
  const dnnl::primitive_attr attr = user_scratchpad();
  dnnl::convolution_forward::primitive_desc forward(
      {dnnl::prop_kind::forward_training, algo, src, forward_weights,
       pass == ConvPass::Forward ? forward_bias : memory::desc(), dst, strides, dilates, padding, padding},
      attr, engine);
  if (pass == ConvPass::Forward) {
    if (is_reference_impl(forward.impl_info_str())) return nullptr;
    result->conv = dnnl::convolution_forward(forward);
    result->scratchpad = forward.scratchpad_desc();
    result->activation_a = activation(forward.src_desc(), user_src, true);
    result->activation_b = activation(forward.dst_desc(), user_dst, false);
    result->weights = forward.weights_desc();
  } else if (pass == ConvPass::BackwardData) {
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
        {algo, src, any_weights, pass_with_bias ? bias : memory::desc(), dst, strides, dilates, padding, padding}, attr,
        engine, forward);
    if (is_reference_impl(backward.impl_info_str())) return nullptr;
    result->conv = dnnl::convolution_backward_weights(backward);
    result->scratchpad = backward.scratchpad_desc();
    result->activation_a = activation(backward.src_desc(), user_src, true);
    result->activation_b = activation(backward.diff_dst_desc(), user_dst, true);
    result->weights = backward.diff_weights_desc();
  }
  // A blocked variant that chose NHWC after all is the Nhwc candidate again.
  if (variant == ConvVariant::Blocked && !result->activation_a.reorder && !result->activation_b.reorder) return nullptr;
  if (result->weights != user_weights) {
    result->weights_reorder = pass == ConvPass::BackwardWeights ? make_reorder(result->weights, user_weights)
                                                                : make_reorder(user_weights, result->weights);
  }
  return result;
}

// Primitives by problem and variant; nullptr (remembered) where oneDNN has none but its reference
// kernel. ConvActivation layouts are not part of the key because Ember's are always NHWC (callers
// convert first) and weights always Ember's plain layout; dtype and bias complete it.
std::shared_ptr<const ConvPrimitive> lookup(ConvPass pass, const ConvSizes& g, const ConvParams& p, DType dtype,
                                            memory::data_type type, bool with_bias, ConvVariant variant) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::shared_ptr<const ConvPrimitive>> cache;
  std::vector<int64_t> key = {static_cast<int64_t>(pass),
                              static_cast<int64_t>(variant),
                              static_cast<int64_t>(dtype),
                              with_bias,
                              g.n,
                              g.c,
                              g.h,
                              g.w,
                              g.o,
                              g.kh,
                              g.kw,
                              p.stride_h,
                              p.stride_w,
                              p.pad_h,
                              p.pad_w,
                              p.dilation_h,
                              p.dilation_w,
                              p.groups};
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
    scratch = scratch_for(prim.scratchpad);
    args.emplace(DNNL_ARG_SCRATCHPAD, user_memory(prim.scratchpad, scratch));
  }
  try {
    SignalsHeld held;
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
  *scratch = scratch_for(prim.weights);
  memory blocked = user_memory(prim.weights, *scratch);
  onednn::execute(*prim.weights_reorder, user, blocked, true);
  return blocked;
}

// An input activation as the primitive reads it: the tensor's memory, or a reordered scratch copy.
memory input_for(const ConvActivation& a, const Tensor& t, Tensor* scratch) {
  if (!a.reorder) return user_memory(a.desc, t);
  *scratch = scratch_for(a.desc);
  memory wanted = user_memory(a.desc, *scratch);
  memory from = user_memory(a.user, t);
  onednn::execute(*a.reorder, from, wanted);
  return wanted;
}

// Where the primitive writes an output activation: the tensor itself, or scratch that
// finish_output() reorders into it.
memory output_for(const ConvActivation& a, const Tensor& t, Tensor* scratch) {
  if (!a.reorder) return user_memory(a.desc, t);
  *scratch = scratch_for(a.desc);
  return user_memory(a.desc, *scratch);
}

void finish_output(const ConvActivation& a, memory& written, const Tensor& t) {
  if (!a.reorder) return;
  memory to = user_memory(a.user, t);
  onednn::execute(*a.reorder, written, to);
}

}  // namespace

std::shared_ptr<const ConvPrimitive> conv_primitive(const ConvProblem& pr, ConvVariant variant) {
  return lookup(pr.pass, pr.g, pr.p, pr.dtype, *data_type(pr.dtype), pr.with_bias, variant);
}

bool winograd_conv_applies(const ConvProblem& pr) {
  const ConvParams& p = pr.p;
  return data_type(pr.dtype) == memory::data_type::f32 && pr.g.kh == 3 && pr.g.kw == 3 && p.stride_h == 1 &&
         p.stride_w == 1 && p.dilation_h == 1 && p.dilation_w == 1 && p.groups == 1;
}

bool winograd_conv_preferred(const ConvProblem& pr) {
  return winograd_conv_applies(pr) && pr.g.c >= 32 && pr.g.o >= 32;
}

Tensor conv_forward(const ConvPrimitive& prim, const ConvProblem& pr, const Tensor& input, const Tensor& weight,
                    const Tensor& b) {
  const ConvSizes& g = pr.g;
  Tensor x = to_channels_last(input), w = weight.contiguous();
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

Tensor conv_backward_data(const ConvPrimitive& prim, const Tensor& grad_output, const Tensor& weight,
                          const Shape& input_shape) {
  Tensor dy = to_channels_last(grad_output), w = weight.contiguous();
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

std::pair<Tensor, Tensor> conv_backward_weight(const ConvPrimitive& prim, const ConvProblem& pr,
                                               const Tensor& grad_output, const Tensor& input,
                                               const Shape& weight_shape, bool want_bias) {
  Tensor x = to_channels_last(input), dy = to_channels_last(grad_output);
  const TensorOptions options(prim.user_weights.data_type() == memory::data_type::f32 ? kFloat32 : input.dtype());
  Tensor grad_weight = empty(weight_shape, options);
  Tensor grad_bias = want_bias ? empty({pr.g.o}, options) : Tensor();
  dnnl::stream& stream = onednn::stream();
  // The primitive writes the gradient in its own layout; a reorder brings it to Ember's.
  Tensor weight_scratch = prim.weights_reorder ? scratch_for(prim.weights) : grad_weight;
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

bool split_batch_weight_grad_applies(const ConvProblem& pr) {
  return pr.pass == ConvPass::BackwardWeights && pr.dtype == kBFloat16 && data_type(kBFloat16).has_value() &&
         num_threads() > 1 && pr.g.n >= num_threads();
}

std::pair<Tensor, Tensor> conv_backward_weight_split_batch(const ConvProblem& pr, const Tensor& grad_output,
                                                           const Tensor& input, const Shape& weight_shape,
                                                           bool want_bias) {
  NoGradGuard no_grad;
  const Tensor x = to_channels_last(input), dy = to_channels_last(grad_output);
  const int threads = num_threads();
  std::vector<std::pair<Tensor, Tensor>> partial(threads);
  parallel_for(0, threads, 1, [&](int64_t lo, int64_t hi) {
    const OneThread one_thread;
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t b0 = pr.g.n * t / threads, b1 = pr.g.n * (t + 1) / threads;
      const ConvProblem share =
          conv_problem(pr.pass, {b1 - b0, pr.g.c, pr.g.h, pr.g.w}, weight_shape, pr.p, pr.dtype, want_bias);
      const auto prim = lookup(share.pass, share.g, share.p, share.dtype, memory::data_type::bf16, want_bias,
                               ConvVariant::NhwcFloat32Weights);
      EMBER_CHECK(prim != nullptr, "conv2d_backward_weight: oneDNN has no bf16 kernel with float32 gradients for ",
                  shape_str(input.sizes()));
      partial[t] = conv_backward_weight(*prim, share, dy.narrow(0, b0, b1 - b0), x.narrow(0, b0, b1 - b0), weight_shape,
                                        want_bias);
    }
  });
  Tensor grad_weight = partial[0].first, grad_bias = partial[0].second;
  for (int t = 1; t < threads; ++t) {
    grad_weight.add_(partial[t].first);
    if (want_bias) grad_bias.add_(partial[t].second);
  }
  return {grad_weight.to(input.dtype()), want_bias ? grad_bias.to(input.dtype()) : Tensor()};
}

}  // namespace ember::cpu::onednn
