// Each chunk of images is unfolded into columns [images, C * KH * KW, OH * OW], and each group's
// product is one batched GEMM over the chunk's images (the weight shared, stride 0). The chunk
// bounds the column buffer; a 1x1 convolution with stride 1 and no padding needs no columns.
// On real GPUs cuDNN goes first; this path runs what it declines and what it is not asked to run.
// 16-bit data accumulates in float32 throughout: the sums that go on after a GEMM (the input
// gradient's overlapping windows, the weight gradient's images) take the GEMM's float32 products
// and round once, at their end.
#include "cuda/conv.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include <tuple>

#include "core/conv_params.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/kernel_select.h"
#include "core/ops.h"
#include "cuda/api.h"
#include "cuda/blas.h"
#include "cuda/device_properties.h"
#include "cuda/kernels/im2col.cuh"

#if defined(EMBER_CUDA)
#include "cuda/cudnn_conv.h"
#endif

namespace ember::cuda {

namespace {

std::atomic<int> kernel_choice{static_cast<int>(ConvKernel::Auto)};
std::atomic<bool> allow_tf32{true};
std::atomic<bool> deterministic_only{true};

// Column-buffer elements per chunk: 128 MB of float32.
constexpr int64_t kColumnBudget = int64_t{32} << 20;

struct Plan {
  ConvGeometry g;
  int64_t out_channels = 0, groups = 1;
  int64_t group_in = 0, group_out = 0;  // channels per group
  int64_t rows = 0;                     // C * KH * KW: column rows per image
  int64_t pixels = 0;                   // OH * OW
  int64_t group_rows = 0;               // C / groups * KH * KW
  bool direct = false;                  // 1x1, stride 1, no padding: the input is its own columns
  int64_t chunk = 1;                    // images per column buffer
};

Plan plan_for(const Shape& input, const Shape& weight, const ConvParams& p) {
  Plan plan;
  ConvGeometry& g = plan.g;
  g.images = input[0];
  g.channels = input[1];
  g.height = input[2];
  g.width = input[3];
  g.kernel_h = weight[2];
  g.kernel_w = weight[3];
  g.stride_h = p.stride_h;
  g.stride_w = p.stride_w;
  g.pad_h = p.pad_h;
  g.pad_w = p.pad_w;
  g.dilation_h = p.dilation_h;
  g.dilation_w = p.dilation_w;
  std::tie(g.out_h, g.out_w) = conv_output_hw(g.height, g.width, g.kernel_h, g.kernel_w, p);
  plan.out_channels = weight[0];
  plan.groups = p.groups;
  plan.group_in = g.channels / p.groups;
  plan.group_out = plan.out_channels / p.groups;
  plan.rows = g.channels * g.kernel_h * g.kernel_w;
  plan.group_rows = plan.group_in * g.kernel_h * g.kernel_w;
  plan.pixels = g.out_h * g.out_w;
  plan.direct =
      g.kernel_h == 1 && g.kernel_w == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0;
  plan.chunk = std::clamp<int64_t>(kColumnBudget / std::max<int64_t>(1, plan.rows * plan.pixels), 1,
                                   std::max<int64_t>(1, g.images));
  return plan;
}

// Pointer to element `offset` of a buffer of `dtype`.
const void* at(const void* base, DType dtype, int64_t offset) {
  return static_cast<const char*>(base) + offset * static_cast<int64_t>(element_size(dtype));
}
void* at(void* base, DType dtype, int64_t offset) {
  return static_cast<char*>(base) + offset * static_cast<int64_t>(element_size(dtype));
}

// Columns of images [first, first + count): the input itself when direct, else unfolded into `buffer`.
const void* columns(const Plan& plan, const Tensor& x, int64_t first, int64_t count, const Tensor& buffer) {
  const int64_t image = plan.g.channels * plan.g.height * plan.g.width;
  const void* images = at(x.data_ptr(), x.dtype(), first * image);
  if (plan.direct) return images;
  ConvGeometry g = plan.g;
  g.images = count;
  im2col(g, x.dtype(), x.device(), images, buffer.data_ptr());
  return buffer.data_ptr();
}

Tensor column_buffer(const Plan& plan, const Tensor& like, DType dtype) {
  if (plan.direct) return Tensor();
  return empty({std::min(plan.chunk, plan.g.images), plan.rows, plan.pixels}, like.options().dtype(dtype));
}

// What sums that continue after a GEMM hold: float32 for 16-bit data, else the data's dtype.
DType partial_sum_dtype(DType dtype) { return dtype == kBFloat16 || dtype == kFloat16 ? kFloat32 : dtype; }

// A GEMM whose C holds `c_dtype`: the operands' dtype, or float32 for 16-bit operands.
void gemm_into(const GemmArgs& args, DType c_dtype) {
  if (c_dtype == args.dtype)
    gemm_kernel(args);
  else
    gemm_float32_output(args);
}

GemmArgs batched(const Tensor& like, int64_t batch) {
  GemmArgs a;
  a.device = like.device();
  a.dtype = like.dtype();
  a.batch = batch;
  return a;
}

void ember_forward(const Plan& plan, const Tensor& x, const Tensor& w, const Tensor& out) {
  Tensor buffer = column_buffer(plan, x, x.dtype());
  const DType dt = x.dtype();
  for (int64_t first = 0; first < plan.g.images; first += plan.chunk) {
    const int64_t count = std::min(plan.chunk, plan.g.images - first);
    const void* col = columns(plan, x, first, count, buffer);
    for (int64_t group = 0; group < plan.groups; ++group) {
      // out[i][group rows] = w[group] [group_out, group_rows] x col[i][group rows] [group_rows, pixels]
      GemmArgs a = batched(x, count);
      a.m = plan.group_out;
      a.n = plan.pixels;
      a.k = plan.group_rows;
      a.a = at(w.data_ptr(), dt, group * plan.group_out * plan.group_rows);
      a.lda = plan.group_rows;
      a.stride_a = 0;
      a.b = at(col, dt, group * plan.group_rows * plan.pixels);
      a.ldb = plan.pixels;
      a.stride_b = plan.rows * plan.pixels;
      a.c = at(out.data_ptr(), dt, (first * plan.out_channels + group * plan.group_out) * plan.pixels);
      a.ldc = plan.pixels;
      a.stride_c = plan.out_channels * plan.pixels;
      gemm_kernel(a);
    }
  }
}

void ember_backward_input(const Plan& plan, const Tensor& dy, const Tensor& w, const Tensor& grad_input) {
  const DType dt = dy.dtype();
  // Columns that col2im sums stay unrounded; the direct case's GEMM is the whole sum.
  const DType col_dt = plan.direct ? dt : partial_sum_dtype(dt);
  Tensor buffer = column_buffer(plan, dy, col_dt);
  const int64_t image = plan.g.channels * plan.g.height * plan.g.width;
  for (int64_t first = 0; first < plan.g.images; first += plan.chunk) {
    const int64_t count = std::min(plan.chunk, plan.g.images - first);
    void* col = plan.direct ? at(grad_input.data_ptr(), dt, first * image) : buffer.data_ptr();
    for (int64_t group = 0; group < plan.groups; ++group) {
      // col[i][group rows] = w[group]^T [group_rows, group_out] x dy[i][group] [group_out, pixels]
      GemmArgs a = batched(dy, count);
      a.trans_a = true;
      a.m = plan.group_rows;
      a.n = plan.pixels;
      a.k = plan.group_out;
      a.a = at(w.data_ptr(), dt, group * plan.group_out * plan.group_rows);
      a.lda = plan.group_rows;
      a.stride_a = 0;
      a.b = at(dy.data_ptr(), dt, (first * plan.out_channels + group * plan.group_out) * plan.pixels);
      a.ldb = plan.pixels;
      a.stride_b = plan.out_channels * plan.pixels;
      a.c = at(col, col_dt, group * plan.group_rows * plan.pixels);
      a.ldc = plan.pixels;
      a.stride_c = plan.rows * plan.pixels;
      gemm_into(a, col_dt);
    }
    if (!plan.direct) {
      ConvGeometry g = plan.g;
      g.images = count;
      col2im(g, dt, dy.device(), col, at(grad_input.data_ptr(), dt, first * image));
    }
  }
}

Tensor ember_backward_weight(const Plan& plan, const Tensor& dy, const Tensor& x, const Shape& weight_shape) {
  const DType dt = x.dtype(), partial_dt = partial_sum_dtype(dt);
  Tensor buffer = column_buffer(plan, x, dt);
  // Per-image products, summed over the chunk's images afterwards: no accumulation order depends
  // on scheduling, and each GEMM stays one batched launch.
  Tensor partial =
      empty({std::min(plan.chunk, plan.g.images), plan.out_channels, plan.group_rows}, x.options().dtype(partial_dt));
  Tensor grad_weight;
  for (int64_t first = 0; first < plan.g.images; first += plan.chunk) {
    const int64_t count = std::min(plan.chunk, plan.g.images - first);
    const void* col = columns(plan, x, first, count, buffer);
    for (int64_t group = 0; group < plan.groups; ++group) {
      // partial[i][group] = dy[i][group] [group_out, pixels] x col[i][group rows]^T [pixels, group_rows]
      GemmArgs a = batched(x, count);
      a.trans_b = true;
      a.m = plan.group_out;
      a.n = plan.group_rows;
      a.k = plan.pixels;
      a.a = at(dy.data_ptr(), dt, (first * plan.out_channels + group * plan.group_out) * plan.pixels);
      a.lda = plan.pixels;
      a.stride_a = plan.out_channels * plan.pixels;
      a.b = at(col, dt, group * plan.group_rows * plan.pixels);
      a.ldb = plan.pixels;
      a.stride_b = plan.rows * plan.pixels;
      a.c = at(partial.data_ptr(), partial_dt, group * plan.group_out * plan.group_rows);
      a.ldc = plan.group_rows;
      a.stride_c = plan.out_channels * plan.group_rows;
      gemm_into(a, partial_dt);
    }
    Tensor chunk_sum = partial.slice(0, 0, count).sum({0}).view(weight_shape);
    if (grad_weight.defined())
      grad_weight.add_(chunk_sum);
    else
      grad_weight = chunk_sum;
  }
  return grad_weight.to(dt);
}

// ---- Choosing a pass's algorithm (core/kernel_select.h, as cudnn.benchmark): on real GPUs every
// algorithm cuDNN offers (deterministic ones only unless set_conv_deterministic(false)) and
// Ember's own; on emulated devices Ember's im2col + GEMM over chunks of images, or image by image
// (fewer column bytes, more launches). Trials run the candidate on the call's tensors and wait
// for the device, so that host time is the candidate's. ----

enum class Pass { Forward, BackwardData, BackwardWeights };

struct Option {
  std::string name;
  enum class Kind { Cudnn, Im2col, Im2colPerImage } kind = Kind::Im2col;
#if defined(EMBER_CUDA)
  CudnnAlgorithm cudnn;
#endif
};

const char* pass_name(Pass pass) {
  return pass == Pass::Forward ? "fwd" : pass == Pass::BackwardData ? "bwd_data" : "bwd_weight";
}

// The math type asked for: TF32 or FMA for float32 (cudnn_allow_tf32()), tensor cores for 16-bit.
const char* math_name(DType dtype) {
  if (dtype == kFloat32) return cudnn_allow_tf32() ? "tf32" : "fma";
  return dtype == kFloat16 || dtype == kBFloat16 ? "tensor-op" : "default";
}

// Asked of the runtime once per device: cudaGetDeviceProperties is far slower than a launch.
const std::string& device_name(int index) {
  static std::mutex mutex;
  static std::map<int, std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = names.find(index);
  if (found == names.end()) found = names.emplace(index, device_properties(index).name).first;
  return found->second;
}

// Everything a decision is made for: the pass, shapes, geometry, dtype, math, the deterministic
// switch, which kernels may run, and the device (its name too: a decision carried to another GPU
// by a checkpoint or a cache is another key).
std::string decision_key(Pass pass, const Shape& input, const Shape& weight, const ConvParams& p, DType dtype,
                         Device device) {
  std::string key = std::string("cuda conv2d ") + pass_name(pass) + " " + dtype_name(dtype) + " x=";
  for (size_t i = 0; i < input.size(); ++i) key += (i ? "x" : "") + std::to_string(input[i]);
  key += " w=";
  for (size_t i = 0; i < weight.size(); ++i) key += (i ? "x" : "") + std::to_string(weight[i]);
  key += " s=" + std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w) + " p=" + std::to_string(p.pad_h) + "x" +
         std::to_string(p.pad_w) + " d=" + std::to_string(p.dilation_h) + "x" + std::to_string(p.dilation_w) +
         " g=" + std::to_string(p.groups) + " math=" + math_name(dtype) +
         (conv_deterministic() ? " deterministic" : " any") +
         (conv_kernel_choice() == ConvKernel::Ember ? " ember-only " : " ") + device.str() + " (" +
         device_name(device.index) + ")";
  return key;
}

std::vector<Option> options_for(Pass pass, const Plan& plan, const Tensor& x, const Tensor& w, const Tensor& y,
                                const ConvParams& p) {
  std::vector<Option> out;
#if defined(EMBER_CUDA)
  if (conv_kernel_choice() == ConvKernel::Auto) {
    const CudnnPass cp = pass == Pass::Forward        ? CudnnPass::Forward
                         : pass == Pass::BackwardData ? CudnnPass::BackwardData
                                                      : CudnnPass::BackwardFilter;
    for (CudnnAlgorithm& a : cudnn_conv_algorithms(cp, x, w, y, p, cudnn_allow_tf32(), conv_deterministic())) {
      Option o;
      o.name = a.name;
      o.kind = Option::Kind::Cudnn;
      o.cudnn = std::move(a);
      out.push_back(std::move(o));
    }
  }
#else
  (void)pass, (void)x, (void)w, (void)y, (void)p;
#endif
  out.push_back({"ember-im2col", Option::Kind::Im2col});
  if (!plan.direct && plan.chunk > 1 && plan.g.images > 1)
    out.push_back({"ember-im2col-per-image", Option::Kind::Im2colPerImage});
  return out;
}

// Runs `o` for the pass on tensors named as the forward's (x input, w weight, y output; the
// gradients in the backward passes); false when cuDNN declined at run time.
bool run_option(const Option& o, Pass pass, const Plan& plan, const Tensor& x, const Tensor& w, const Tensor& y,
                const ConvParams& p) {
  if (o.kind == Option::Kind::Cudnn) {
#if defined(EMBER_CUDA)
    const CudnnPass cp = pass == Pass::Forward        ? CudnnPass::Forward
                         : pass == Pass::BackwardData ? CudnnPass::BackwardData
                                                      : CudnnPass::BackwardFilter;
    return cudnn_conv_run(cp, o.cudnn, x, w, y, p, cudnn_allow_tf32());
#else
    (void)p;
    return false;
#endif
  }
  Plan run_plan = plan;
  if (o.kind == Option::Kind::Im2colPerImage) run_plan.chunk = 1;
  switch (pass) {
    case Pass::Forward:
      ember_forward(run_plan, x, w, y);
      break;
    case Pass::BackwardData:
      ember_backward_input(run_plan, y, w, x);
      break;
    case Pass::BackwardWeights:
      copy_into(w, ember_backward_weight(run_plan, y, x, w.sizes()));
      break;
  }
  return true;
}

// The pass through the option chosen for its key (trials on first meeting it in benchmark mode),
// falling back to Ember's im2col when cuDNN declines at run time.
void run_pass(Pass pass, const Plan& plan, const Tensor& x, const Tensor& w, const Tensor& y, const ConvParams& p) {
  static kernel_select::Memo<Option> chosen;
  const std::string key = decision_key(pass, x.sizes(), w.sizes(), p, x.dtype(), x.device());
  std::optional<Option> option = chosen.find(key);
  if (!option) {
    std::vector<Option> options = options_for(pass, plan, x, w, y, p);
    if (!kernel_select::may_differ_from_heuristic()) options.resize(1);
    std::vector<std::string> names;
    for (const Option& o : options) names.push_back(o.name);
    const int index = kernel_select::choose(key, names, 0, [&](int i) {
      if (!run_option(options[static_cast<size_t>(i)], pass, plan, x, w, y, p))
        EMBER_FAIL("conv2d: cuDNN declined ", options[static_cast<size_t>(i)].name, " at run time");
      synchronize(x.device().index);
    });
    option = chosen.store(key, options[static_cast<size_t>(index)]);
  }
  kernel_select::Timer timer(key);
  if (!run_option(*option, pass, plan, x, w, y, p))
    run_option({"ember-im2col", Option::Kind::Im2col}, pass, plan, x, w, y, p);
}

}  // namespace

void set_conv_kernel(ConvKernel kernel) { kernel_choice.store(static_cast<int>(kernel)); }
void set_conv_deterministic(bool deterministic) { deterministic_only.store(deterministic); }
bool conv_deterministic() { return deterministic_only.load(); }
ConvKernel conv_kernel_choice() { return static_cast<ConvKernel>(kernel_choice.load()); }
void set_cudnn_allow_tf32(bool allow) { allow_tf32.store(allow); }
bool cudnn_allow_tf32() { return allow_tf32.load(); }

Tensor conv2d_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p) {
  NoGradGuard no_grad;
  const Plan plan = plan_for(input.sizes(), weight.sizes(), p);
  Tensor x = input.contiguous(), w = weight.contiguous();
  Tensor out = empty({plan.g.images, plan.out_channels, plan.g.out_h, plan.g.out_w}, input.options());
  if (out.numel() == 0) return out;
  run_pass(Pass::Forward, plan, x, w, out, p);
  if (bias.defined()) out.add_(bias.to(out.dtype()).view({1, plan.out_channels, 1, 1}));
  return out;
}

Tensor conv2d_backward_input_kernel(const Tensor& grad_output, const Tensor& weight, const Shape& input_shape,
                                    const ConvParams& p) {
  NoGradGuard no_grad;
  const Plan plan = plan_for(input_shape, weight.sizes(), p);
  Tensor dy = grad_output.contiguous(), w = weight.contiguous();
  Tensor grad_input = empty(input_shape, dy.options());
  if (grad_input.numel() == 0) return grad_input;
  if (dy.numel() == 0 || plan.group_out == 0) return grad_input.zero_();
  run_pass(Pass::BackwardData, plan, grad_input, w, dy, p);
  return grad_input;
}

std::pair<Tensor, Tensor> conv2d_backward_weight_kernel(const Tensor& grad_output, const Tensor& input,
                                                        const Shape& weight_shape, bool want_bias,
                                                        const ConvParams& p) {
  NoGradGuard no_grad;
  const Plan plan = plan_for(input.sizes(), weight_shape, p);
  Tensor dy = grad_output.contiguous(), x = input.contiguous();
  Tensor grad_bias = want_bias ? dy.sum({0, 2, 3}) : Tensor();
  if (dy.numel() == 0 || shape_numel(weight_shape) == 0) return {zeros(weight_shape, x.options()), grad_bias};
  Tensor grad_weight = empty(weight_shape, x.options());
  run_pass(Pass::BackwardWeights, plan, x, grad_weight, dy, p);
  return {grad_weight, grad_bias};
}

}  // namespace ember::cuda
