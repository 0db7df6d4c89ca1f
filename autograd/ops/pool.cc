// Pooling: max (with indices), average and adaptive average, forward and backward.
#include "autograd/function.h"
#include "autograd/functional.h"
#include "autograd/saved.h"
#include "core/autograd_hooks.h"
#include "core/backend.h"
#include "core/grad_mode.h"

namespace ember {

namespace autograd {
namespace {

class MaxPool2dBackward final : public Node {
 public:
  MaxPool2dBackward(const Tensor& indices, const Shape& input_shape, const PoolParams& p)
      : indices_(indices), input_shape_(input_shape), params_(p) {}
  std::string name() const override { return "MaxPool2DWithIndicesBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {kernels_for(grads[0].device(), "max_pool2d backward")
                .max_pool2d_backward(grads[0], indices_.unpack(name()), input_shape_, params_)};
  }
  void release_saved() override { indices_.reset(); }

 private:
  SavedTensor indices_;
  Shape input_shape_;
  PoolParams params_;
};

class AvgPool2dBackward final : public Node {
 public:
  AvgPool2dBackward(const Shape& input_shape, const PoolParams& p) : input_shape_(input_shape), params_(p) {}
  std::string name() const override { return "AvgPool2DBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {kernels_for(grads[0].device(), "avg_pool2d backward").avg_pool2d_backward(grads[0], input_shape_, params_)};
  }

 private:
  Shape input_shape_;
  PoolParams params_;
};

class AdaptiveAvgPool2dBackward final : public Node {
 public:
  explicit AdaptiveAvgPool2dBackward(const Shape& input_shape) : input_shape_(input_shape) {}
  std::string name() const override { return "AdaptiveAvgPool2DBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {kernels_for(grads[0].device(), "adaptive_avg_pool2d backward")
                .adaptive_avg_pool2d_backward(grads[0], input_shape_)};
  }

 private:
  Shape input_shape_;
};

// Output length of one pooled axis, PyTorch's rule: with ceil_mode the last window must still
// start inside the input or its left padding.
int64_t pooled_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  int64_t out = (ceil_mode ? span + stride - 1 : span) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

PoolParams pool_params(const char* op, const Tensor& input, Size2 kernel, std::optional<Size2> stride_in, Size2 padding,
                       Size2 dilation, bool ceil_mode) {
  EMBER_CHECK(input.dim() == 4, op, ": input must be 4-D [N, C, H, W], got ", shape_str(input.sizes()));
  EMBER_CHECK(is_floating(input.dtype()), op, ": expected a floating input, got ", dtype_name(input.dtype()));
  Size2 stride = stride_in.value_or(kernel);
  EMBER_CHECK(kernel.h > 0 && kernel.w > 0 && stride.h > 0 && stride.w > 0 && dilation.h > 0 && dilation.w > 0, op,
              ": kernel size, stride and dilation must be positive");
  EMBER_CHECK(padding.h >= 0 && padding.w >= 0 && padding.h * 2 <= kernel.h && padding.w * 2 <= kernel.w, op,
              ": pad should be at most half of the kernel size, got padding (", padding.h, ", ", padding.w,
              ") for kernel (", kernel.h, ", ", kernel.w, ")");
  PoolParams p;
  p.kernel_h = kernel.h;
  p.kernel_w = kernel.w;
  p.stride_h = stride.h;
  p.stride_w = stride.w;
  p.pad_h = padding.h;
  p.pad_w = padding.w;
  p.dilation_h = dilation.h;
  p.dilation_w = dilation.w;
  p.out_h = pooled_size(input.size(2), kernel.h, padding.h, stride.h, dilation.h, ceil_mode);
  p.out_w = pooled_size(input.size(3), kernel.w, padding.w, stride.w, dilation.w, ceil_mode);
  EMBER_CHECK(p.out_h > 0 && p.out_w > 0, op, ": output size is too small (", p.out_h, "x", p.out_w, ") for input ",
              shape_str(input.sizes()));
  return p;
}

}  // namespace
}  // namespace autograd

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Size2 kernel, std::optional<Size2> stride,
                                                  Size2 padding, Size2 dilation, bool ceil_mode) {
  PoolParams p = autograd::pool_params("max_pool2d", input, kernel, stride, padding, dilation, ceil_mode);
  std::pair<Tensor, Tensor> result;
  {
    NoGradGuard no_grad;
    result = kernels_for(input.device(), "max_pool2d").max_pool2d(input, p);
  }
  if (!needs_grad({&input})) return result;
  auto node = std::make_shared<autograd::MaxPool2dBackward>(result.second, input.sizes(), p);
  autograd::connect(node, {&input});
  result.first = autograd::attach(node, result.first);
  return result;
}

Tensor max_pool2d(const Tensor& input, Size2 kernel, std::optional<Size2> stride, Size2 padding, Size2 dilation,
                  bool ceil_mode) {
  return max_pool2d_with_indices(input, kernel, stride, padding, dilation, ceil_mode).first;
}

Tensor avg_pool2d(const Tensor& input, Size2 kernel, std::optional<Size2> stride, Size2 padding, bool ceil_mode,
                  bool count_include_pad) {
  PoolParams p = autograd::pool_params("avg_pool2d", input, kernel, stride, padding, 1, ceil_mode);
  p.count_include_pad = count_include_pad;
  Tensor out;
  {
    NoGradGuard no_grad;
    out = kernels_for(input.device(), "avg_pool2d").avg_pool2d(input, p);
  }
  if (!needs_grad({&input})) return out;
  auto node = std::make_shared<autograd::AvgPool2dBackward>(input.sizes(), p);
  autograd::connect(node, {&input});
  return autograd::attach(node, out);
}

Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size) {
  EMBER_CHECK(input.dim() == 4, "adaptive_avg_pool2d: input must be 4-D [N, C, H, W], got ", shape_str(input.sizes()));
  EMBER_CHECK(output_size.h > 0 && output_size.w > 0, "adaptive_avg_pool2d: output size must be positive, got (",
              output_size.h, ", ", output_size.w, ")");
  EMBER_CHECK(is_floating(input.dtype()), "adaptive_avg_pool2d: expected a floating input, got ",
              dtype_name(input.dtype()));
  Tensor out;
  {
    NoGradGuard no_grad;
    out = kernels_for(input.device(), "adaptive_avg_pool2d").adaptive_avg_pool2d(input, output_size.h, output_size.w);
  }
  if (!needs_grad({&input})) return out;
  auto node = std::make_shared<autograd::AdaptiveAvgPool2dBackward>(input.sizes());
  autograd::connect(node, {&input});
  return autograd::attach(node, out);
}

}  // namespace ember
