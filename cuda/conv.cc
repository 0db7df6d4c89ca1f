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
#include <tuple>

#include "core/conv_params.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "cuda/blas.h"
#include "cuda/kernels/im2col.cuh"

#if defined(EMBER_CUDA)
#include "cuda/cudnn_conv.h"
#endif

namespace ember::cuda {

namespace {

std::atomic<int> kernel_choice{static_cast<int>(ConvKernel::Auto)};
std::atomic<bool> allow_tf32{true};

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

// cuDNN runs a pass on real GPUs unless Ember's kernels are asked for; false (or an undefined
// tensor) when Ember's kernels are to run, cuDNN having declined or not been asked.
bool cudnn_forward(const Tensor& x, const Tensor& w, const Tensor& out, const ConvParams& p) {
#if defined(EMBER_CUDA)
  return conv_kernel_choice() == ConvKernel::Auto && cudnn_conv_forward(x, w, out, p, cudnn_allow_tf32());
#else
  return false;
#endif
}

bool cudnn_backward_input(const Tensor& dy, const Tensor& w, const Tensor& grad_input, const ConvParams& p) {
#if defined(EMBER_CUDA)
  return conv_kernel_choice() == ConvKernel::Auto && cudnn_conv_backward_data(dy, w, grad_input, p, cudnn_allow_tf32());
#else
  return false;
#endif
}

Tensor cudnn_backward_weight(const Tensor& dy, const Tensor& x, const Shape& weight_shape, const ConvParams& p) {
#if defined(EMBER_CUDA)
  if (conv_kernel_choice() == ConvKernel::Auto) {
    Tensor grad_weight = empty(weight_shape, x.options());
    if (cudnn_conv_backward_filter(dy, x, grad_weight, p, cudnn_allow_tf32())) return grad_weight;
  }
#endif
  return Tensor();
}

}  // namespace

void set_conv_kernel(ConvKernel kernel) { kernel_choice.store(static_cast<int>(kernel)); }
ConvKernel conv_kernel_choice() { return static_cast<ConvKernel>(kernel_choice.load()); }
void set_cudnn_allow_tf32(bool allow) { allow_tf32.store(allow); }
bool cudnn_allow_tf32() { return allow_tf32.load(); }

Tensor conv2d_kernel(const Tensor& input, const Tensor& weight, const Tensor& bias, const ConvParams& p) {
  NoGradGuard no_grad;
  const Plan plan = plan_for(input.sizes(), weight.sizes(), p);
  Tensor x = input.contiguous(), w = weight.contiguous();
  Tensor out = empty({plan.g.images, plan.out_channels, plan.g.out_h, plan.g.out_w}, input.options());
  if (out.numel() == 0) return out;
  if (!cudnn_forward(x, w, out, p)) ember_forward(plan, x, w, out);
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
  if (!cudnn_backward_input(dy, w, grad_input, p)) ember_backward_input(plan, dy, w, grad_input);
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
  Tensor grad_weight = cudnn_backward_weight(dy, x, weight_shape, p);
  if (!grad_weight.defined()) grad_weight = ember_backward_weight(plan, dy, x, weight_shape);
  return {grad_weight, grad_bias};
}

}  // namespace ember::cuda
