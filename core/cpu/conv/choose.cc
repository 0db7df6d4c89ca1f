// The CPU conv2d kernel-table entries (declared with every entry in core/cpu/kernels.h): per pass and problem,
// one candidate of kCandidates runs, chosen once per problem by core/kernel_select.h (by default
// each problem's first call times every candidate that applies; EMBER_KERNEL_SELECT=heuristic
// takes the first whose `preferred` rule holds, the rules tools/bench/conv measured). Which wins
// depends on the CPU's caches as much as its ISA. bf16 problems (autocast's) have oneDNN's bf16
// kernels, where the CPU has native bf16, and the problem run as float32 (as-float32, the only
// candidate elsewhere) to choose from. Other dtypes oneDNN does not take, and problems without a
// primitive of oneDNN's, go to ember::cpu::reference.
//
// To add a candidate: write its kernel and its rules (`*_applies`, and `*_preferred` if the
// heuristic should ever pick it) in its own file here, and add one row to kCandidates.
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu/conv/conv_problem.h"
#include "core/cpu/conv/conv_reference.h"
#include "core/cpu/conv/direct_conv.h"
#include "core/cpu/conv/direct_conv_weight_grad.h"
#include "core/cpu/conv/onednn_conv.h"
#include "core/cpu/conv/strided_conv_backward_data.h"
#include "core/cpu/conv/strided_conv_forward.h"
#include "core/cpu/conv/winograd_avx2.h"
#include "core/cpu/conv/winograd_bf16.h"
#include "core/cpu/dnnl/runtime.h"
#include "core/cpu/kernels.h"
#include "core/cpu/thread_pool.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/kernel_select.h"

namespace ember::cpu {

namespace {

using onednn::ConvPrimitive;
using onednn::ConvVariant;

// Ember's own kernels, on dense channels-last float32 memory (direct_conv.h's contract).
using ForwardKernel = void (*)(const DirectConvGeometry&, const float* x, const float* weight, const float* bias,
                               float* y);
using BackwardDataKernel = void (*)(const DirectConvGeometry&, const float* dy, const float* weight, float* dx);
using BackwardWeightKernel = void (*)(const DirectConvGeometry&, const float* x, const float* dy, float* grad_weight);
// Passes on the tensors themselves (any dtype the candidate applies to).
using TensorForward = Tensor (*)(const ConvProblem&, const Tensor& input, const Tensor& weight, const Tensor& bias);
using TensorBackwardData = Tensor (*)(const ConvProblem&, const Tensor& grad_output, const Tensor& weight,
                                      const Shape& input_shape);
using TensorWeightGrad = std::pair<Tensor, Tensor> (*)(const ConvProblem&, const Tensor& grad_output,
                                                       const Tensor& input, const Shape& weight_shape, bool want_bias);

// One way to run some of the passes: one of Ember's kernels (a non-null kernel per pass it runs),
// one of oneDNN's primitive variants (every pass), a bf16 problem run as float32 (every pass), or
// passes on tensors.
struct Candidate {
  const char* name;  // as kernel_select reports, caches and checkpoints it
  // Where trials may run it (nullptr: wherever it runs the pass); for oneDNN's, also where
  // conv_primitive() has a primitive.
  bool (*applies)(const ConvProblem&);
  // Where the heuristic takes it without trials (nullptr: never); implies `applies`.
  bool (*preferred)(const ConvProblem&);
  ForwardKernel forward;
  BackwardDataKernel backward_data;
  BackwardWeightKernel backward_weight;
  std::optional<ConvVariant> onednn;
  // bf16 operands cast to float32, the float32 problem run by its own choice of candidate (Winograd
  // among them, which oneDNN has for float32 only), and the result cast back: where oneDNN's bf16
  // kernels lose to its float32 ones by more than the casts cost.
  bool as_float32 = false;
  TensorWeightGrad weight_grad_on_tensors = nullptr;
  TensorForward forward_on_tensors = nullptr;
  TensorBackwardData backward_data_on_tensors = nullptr;
};

// A rule of Ember's kernels, on problems they can take at all (float32, ungrouped, non-empty).
template <bool (*Rule)(const DirectConvGeometry&)>
bool own(const ConvProblem& pr) {
  return pr.own && Rule(*pr.own);
}

const BackwardDataKernel strided_backward_data = &strided_conv_backward_data;  // the 4-argument overload

bool bf16_problem(const ConvProblem& pr) { return pr.dtype == kBFloat16; }

// Without native bf16 oneDNN has no bf16 kernels for Ember: float32 arithmetic is the fast way.
bool bf16_without_onednn(const ConvProblem& pr) { return bf16_problem(pr) && !onednn::data_type(pr.dtype); }

// In the order trials run them and the heuristic consults their rules (tests seeded with
// EMBER_KERNEL_TRIAL_SEED depend on it). onednn-nhwc is the heuristic's choice where no rule
// holds; without a primitive it runs the reference (fallback()).
const Candidate kCandidates[] = {
    {"ember-direct-avx512", own<direct_conv_applies>, own<direct_conv_preferred>, direct_conv_forward, nullptr, nullptr,
     std::nullopt},
    {"ember-strided-avx2", own<strided_conv_forward_applies>, own<strided_conv_forward_preferred>, strided_conv_forward,
     nullptr, nullptr, std::nullopt},
    {"ember-strided-bwd-data-avx2", own<strided_conv_backward_data_applies>, own<strided_conv_backward_data_preferred>,
     nullptr, strided_backward_data, nullptr, std::nullopt},
    {"ember-weight-grad-avx2", own<direct_conv_weight_grad_applies>, own<direct_conv_weight_grad_preferred>, nullptr,
     nullptr, direct_conv_weight_grad, std::nullopt},
    {"ember-winograd-avx2", own<winograd_avx2_applies>, nullptr, winograd_avx2_forward, winograd_avx2_backward_data,
     nullptr, std::nullopt},
    {"onednn-nhwc", nullptr, nullptr, nullptr, nullptr, nullptr, ConvVariant::Nhwc},
    {"onednn-blocked", nullptr, nullptr, nullptr, nullptr, nullptr, ConvVariant::Blocked},
    {"onednn-winograd", onednn::winograd_conv_applies, onednn::winograd_conv_preferred, nullptr, nullptr, nullptr,
     ConvVariant::Winograd},
    {"as-float32", bf16_problem, bf16_without_onednn, nullptr, nullptr, nullptr, std::nullopt, true},
    {"onednn-split-batch", onednn::split_batch_weight_grad_applies, onednn::split_batch_weight_grad_applies, nullptr,
     nullptr, nullptr, std::nullopt, false, onednn::conv_backward_weight_split_batch},
    {"ember-winograd-bf16", winograd_bf16_applies, nullptr, nullptr, nullptr, nullptr, std::nullopt, false, nullptr,
     winograd_bf16_forward, winograd_bf16_backward_data},
};

bool runs(const Candidate& c, ConvPass pass) {
  if (c.onednn || c.as_float32) return true;
  switch (pass) {
    case ConvPass::Forward:
      return c.forward != nullptr || c.forward_on_tensors != nullptr;
    case ConvPass::BackwardData:
      return c.backward_data != nullptr || c.backward_data_on_tensors != nullptr;
    case ConvPass::BackwardWeights:
      return c.backward_weight != nullptr || c.weight_grad_on_tensors != nullptr;
  }
  return false;
}

const Candidate& fallback() {
  for (const Candidate& c : kCandidates)
    if (c.onednn == ConvVariant::Nhwc) return c;
  EMBER_FAIL("conv2d: no onednn-nhwc candidate");
}

// A candidate made ready for one problem: oneDNN's carry their primitive (null: the reference).
struct Option {
  const Candidate* candidate;
  std::shared_ptr<const ConvPrimitive> prim;
};

// The candidate for the problem, if it can take it.
std::optional<Option> prepare(const Candidate& c, const ConvProblem& pr) {
  if (!runs(c, pr.pass) || (c.applies && !c.applies(pr))) return std::nullopt;
  if (!c.onednn) return Option{&c, nullptr};
  if (!onednn::data_type(pr.dtype)) return std::nullopt;
  auto prim = onednn::conv_primitive(pr, *c.onednn);
  if (!prim) return std::nullopt;
  return Option{&c, std::move(prim)};
}

// EMBER_KERNEL_SELECT=heuristic's choice, and the choice when no trial succeeds: the first
// candidate whose rule holds, else onednn-nhwc.
Option heuristic_option(const ConvProblem& pr) {
  for (const Candidate& c : kCandidates) {
    if (!c.preferred || !runs(c, pr.pass) || !c.preferred(pr)) continue;
    if (auto option = prepare(c, pr)) return *option;
  }
  const Candidate& nhwc = fallback();
  return {&nhwc, onednn::conv_primitive(pr, *nhwc.onednn)};
}

// Every candidate that can take the pass, in kCandidates' order.
std::vector<Option> all_options(const ConvProblem& pr) {
  std::vector<Option> out;
  for (const Candidate& c : kCandidates)
    if (auto option = prepare(c, pr)) out.push_back(std::move(*option));
  return out;
}

// What a decision is made for: the pass, shapes, params, dtype, bias and thread count.
std::string decision_key(const ConvProblem& pr) {
  static const char* passes[] = {"fwd", "bwd_data", "bwd_weight"};
  const ConvSizes& g = pr.g;
  const ConvParams& p = pr.p;
  std::ostringstream k;
  k << "conv2d " << passes[static_cast<int>(pr.pass)] << " " << dtype_name(pr.dtype) << " x=" << g.n << "x" << g.c
    << "x" << g.h << "x" << g.w << " w=" << g.o << "x" << g.c / p.groups << "x" << g.kh << "x" << g.kw
    << " s=" << p.stride_h << "x" << p.stride_w << " p=" << p.pad_h << "x" << p.pad_w << " d=" << p.dilation_h << "x"
    << p.dilation_w << " g=" << p.groups << (pr.with_bias ? " bias" : "") << " threads=" << num_threads();
  return k.str();
}

// The option for the pass: the heuristic's, or the fastest of all_options() measured on the
// caller's data by `trial`, decided once per key (core/kernel_select.h).
template <class Trial>
Option select(const ConvProblem& pr, const std::string& key, const Trial& trial) {
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
    if (std::string(o.candidate->name) == heuristic.candidate->name) heuristic_index = static_cast<int>(names.size());
    names.push_back(o.candidate->name);
  }
  const int index = kernel_select::choose(key, names, heuristic_index, [&](int i) { trial(options[i]); });
  return chosen.store(key, options[index]);
}

// ---- Running one option ----

Tensor forward_with(const Option& o, const ConvProblem& pr, const Tensor& input, const Tensor& weight,
                    const Tensor& bias);
Tensor backward_data_with(const Option& o, const ConvProblem& pr, const Tensor& grad_output, const Tensor& weight,
                          const Shape& input_shape);
std::pair<Tensor, Tensor> backward_weight_with(const Option& o, const ConvProblem& pr, const Tensor& grad_output,
                                               const Tensor& input, const Shape& weight_shape, bool want_bias);

// Each pass's option for the problem, trials run on the call's own tensors.
Option forward_option(const ConvProblem& pr, const std::string& key, const Tensor& input, const Tensor& weight,
                      const Tensor& bias) {
  return select(pr, key, [&](const Option& c) { forward_with(c, pr, input, weight, bias); });
}

Option backward_data_option(const ConvProblem& pr, const std::string& key, const Tensor& grad_output,
                            const Tensor& weight, const Shape& input_shape) {
  return select(pr, key, [&](const Option& c) { backward_data_with(c, pr, grad_output, weight, input_shape); });
}

Option backward_weight_option(const ConvProblem& pr, const std::string& key, const Tensor& grad_output,
                              const Tensor& input, const Shape& weight_shape, bool want_bias) {
  return select(pr, key,
                [&](const Option& c) { backward_weight_with(c, pr, grad_output, input, weight_shape, want_bias); });
}

// The as-float32 candidate: the same pass of the float32 problem, with its own decision (not timed
// apart in profiles: its time is the bf16 pass's).
ConvProblem float32_problem(const ConvProblem& pr, const Shape& input, const Shape& weight) {
  return conv_problem(pr.pass, input, weight, pr.p, kFloat32, pr.with_bias);
}

Tensor as_float32(const Tensor& t) { return t.defined() ? t.to(kFloat32) : Tensor(); }
Tensor as_bf16(const Tensor& t) { return t.defined() ? t.to(kBFloat16) : Tensor(); }

Tensor forward_with(const Option& o, const ConvProblem& pr, const Tensor& input, const Tensor& weight,
                    const Tensor& bias) {
  NoGradGuard no_grad;
  if (o.candidate->as_float32) {
    const Tensor x = as_float32(input), w = as_float32(weight), b = as_float32(bias);
    const ConvProblem f = float32_problem(pr, x.sizes(), w.sizes());
    return as_bf16(forward_with(forward_option(f, decision_key(f), x, w, b), f, x, w, b));
  }
  if (TensorForward run = o.candidate->forward_on_tensors) return run(pr, input, weight, bias);
  const ConvSizes& g = pr.g;
  Tensor b = bias.defined() ? bias.to(input.dtype()).contiguous() : Tensor();
  if (ForwardKernel kernel = o.candidate->forward) {
    Tensor x = onednn::to_channels_last(input), w = weight.contiguous();
    Tensor y = empty_channels_last({g.n, g.o, g.oh, g.ow}, input.options());
    const float* b_data = b.defined() ? b.data_ptr<float>() : nullptr;
    kernel(*pr.own, x.data_ptr<float>(), w.data_ptr<float>(), b_data, y.data_ptr<float>());
    return y;
  }
  if (!o.prim) return reference::conv2d(input, weight, bias, pr.p);
  return onednn::conv_forward(*o.prim, pr, input, weight, b);
}

Tensor backward_data_with(const Option& o, const ConvProblem& pr, const Tensor& grad_output, const Tensor& weight,
                          const Shape& input_shape) {
  NoGradGuard no_grad;
  if (o.candidate->as_float32) {
    const Tensor dy = as_float32(grad_output), w = as_float32(weight);
    const ConvProblem f = float32_problem(pr, input_shape, w.sizes());
    return as_bf16(
        backward_data_with(backward_data_option(f, decision_key(f), dy, w, input_shape), f, dy, w, input_shape));
  }
  if (TensorBackwardData run = o.candidate->backward_data_on_tensors) return run(pr, grad_output, weight, input_shape);
  if (BackwardDataKernel kernel = o.candidate->backward_data) {
    Tensor dy = onednn::to_channels_last(grad_output), w = weight.contiguous();
    Tensor dx = empty_channels_last(input_shape, grad_output.options());
    kernel(*pr.own, dy.data_ptr<float>(), w.data_ptr<float>(), dx.data_ptr<float>());
    return dx;
  }
  if (!o.prim) return reference::conv2d_backward_input(grad_output, weight, input_shape, pr.p);
  return onednn::conv_backward_data(*o.prim, grad_output, weight, input_shape);
}

std::pair<Tensor, Tensor> backward_weight_with(const Option& o, const ConvProblem& pr, const Tensor& grad_output,
                                               const Tensor& input, const Shape& weight_shape, bool want_bias) {
  NoGradGuard no_grad;
  if (o.candidate->as_float32) {
    const Tensor dy = as_float32(grad_output), x = as_float32(input);
    const ConvProblem f = float32_problem(pr, x.sizes(), weight_shape);
    const Option chosen = backward_weight_option(f, decision_key(f), dy, x, weight_shape, want_bias);
    auto [grad_weight, grad_bias] = backward_weight_with(chosen, f, dy, x, weight_shape, want_bias);
    return {as_bf16(grad_weight), as_bf16(grad_bias)};
  }
  if (TensorWeightGrad run = o.candidate->weight_grad_on_tensors)
    return run(pr, grad_output, input, weight_shape, want_bias);
  if (BackwardWeightKernel kernel = o.candidate->backward_weight) {
    Tensor x = onednn::to_channels_last(input), dy = onednn::to_channels_last(grad_output);
    Tensor grad_weight = empty(weight_shape, input.options());
    kernel(*pr.own, x.data_ptr<float>(), dy.data_ptr<float>(), grad_weight.data_ptr<float>());
    // The bias gradient is dy summed over every pixel: a sum over N, H and W of the logical tensor.
    Tensor grad_bias = want_bias ? dy.sum({0, 2, 3}) : Tensor();
    return {grad_weight, grad_bias};
  }
  if (!o.prim) return reference::conv2d_backward_weight(grad_output, input, weight_shape, want_bias, pr.p);
  return onednn::conv_backward_weight(*o.prim, pr, grad_output, input, weight_shape, want_bias);
}

// Whether some candidate takes the operands: oneDNN's types (Ember's kernels are float32 only, a
// narrower rule), and bf16 everywhere (as-float32).
bool fast_dtypes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() > 0 && b.numel() > 0 &&
         (onednn::data_type(a.dtype()).has_value() || a.dtype() == kBFloat16);
}

}  // namespace

Tensor conv2d_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p) {
  if (!fast_dtypes(input, weight)) return reference::conv2d(input, weight, bias, p);
  const ConvProblem pr =
      conv_problem(ConvPass::Forward, input.sizes(), weight.sizes(), p, input.dtype(), bias.defined());
  const std::string key = decision_key(pr);
  const Option o = forward_option(pr, key, input, weight, bias);
  kernel_select::Timer timer(key);
  return forward_with(o, pr, input, weight, bias);
}

Tensor conv2d_backward_input_kernel(const Tensor& grad_output, const Tensor& weight, const Shape& input_shape,
                                    const ConvParams& p) {
  if (!fast_dtypes(grad_output, weight)) return reference::conv2d_backward_input(grad_output, weight, input_shape, p);
  const ConvProblem pr =
      conv_problem(ConvPass::BackwardData, input_shape, weight.sizes(), p, grad_output.dtype(), false);
  const std::string key = decision_key(pr);
  const Option o = backward_data_option(pr, key, grad_output, weight, input_shape);
  kernel_select::Timer timer(key);
  return backward_data_with(o, pr, grad_output, weight, input_shape);
}

std::pair<Tensor, Tensor> conv2d_backward_weight_kernel(const Tensor& grad_output, const Tensor& input,
                                                        const Shape& weight_shape, bool want_bias,
                                                        const ConvParams& p) {
  if (!fast_dtypes(grad_output, input))
    return reference::conv2d_backward_weight(grad_output, input, weight_shape, want_bias, p);
  const ConvProblem pr =
      conv_problem(ConvPass::BackwardWeights, input.sizes(), weight_shape, p, input.dtype(), want_bias);
  const std::string key = decision_key(pr);
  const Option o = backward_weight_option(pr, key, grad_output, input, weight_shape, want_bias);
  kernel_select::Timer timer(key);
  return backward_weight_with(o, pr, grad_output, input, weight_shape, want_bias);
}

}  // namespace ember::cpu
