// Pooling: max (with indices), average and adaptive average, forward and backward, and the
// shape checks they share.
#include <sstream>

#include "autograd/function.h"
#include "autograd/functional.h"
#include "autograd/saved.h"
#include "core/autograd_hooks.h"
#include "core/backend.h"
#include "core/grad_mode.h"
#include "core/pool_math.h"

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

// PyTorch's rules for a pooling input (pool2d_shape_check): 4-D, floating, and only the batch may
// be empty.
void check_pool_input(const char* op, const Tensor& input) {
  EMBER_CHECK(input.dim() == 4 && input.size(1) > 0 && input.size(2) > 0 && input.size(3) > 0, op,
              ": input must be 4-D [N, C, H, W] with non-zero C, H and W (N may be 0), got ", shape_str(input.sizes()));
  EMBER_CHECK(is_floating(input.dtype()), op, ": expected a floating input, got ", dtype_name(input.dtype()));
}

// The window's parameters and output size, checked by PyTorch's rules (pooling_output_shape and
// pool2d_shape_check) for every backend; one rule more: no max-pooling window may lie wholly in
// the padding (dilation can make one, and PyTorch then returns -inf and an index outside the input).
PoolParams pool_params(const char* op, const Tensor& input, Size2 kernel, std::optional<Size2> stride_in, Size2 padding,
                       Size2 dilation, bool ceil_mode) {
  check_pool_input(op, input);
  Size2 stride = stride_in.value_or(kernel);
  EMBER_CHECK(kernel.h > 0 && kernel.w > 0, op, ": kernel size must be positive, got (", kernel.h, ", ", kernel.w, ")");
  EMBER_CHECK(stride.h > 0 && stride.w > 0, op, ": stride must be positive, got (", stride.h, ", ", stride.w, ")");
  EMBER_CHECK(dilation.h > 0 && dilation.w > 0, op, ": dilation must be positive, got (", dilation.h, ", ", dilation.w,
              ")");
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
  p.out_h = formula::pooled_length(input.size(2), kernel.h, stride.h, padding.h, dilation.h, ceil_mode);
  p.out_w = formula::pooled_length(input.size(3), kernel.w, stride.w, padding.w, dilation.w, ceil_mode);
  const auto geometry = [&] {
    std::ostringstream out;
    out << "input " << shape_str(input.sizes()) << " with kernel (" << kernel.h << ", " << kernel.w << "), stride ("
        << stride.h << ", " << stride.w << "), padding (" << padding.h << ", " << padding.w << "), dilation ("
        << dilation.h << ", " << dilation.w << ")" << (ceil_mode ? " and ceil_mode" : "");
    return out.str();
  };
  EMBER_CHECK(p.out_h > 0 && p.out_w > 0, op, ": output size is too small: ", geometry(), " gives ", p.out_h, "x",
              p.out_w);
  const int64_t empty_row =
      formula::first_window_in_padding(input.size(2), p.out_h, kernel.h, stride.h, padding.h, dilation.h);
  const int64_t empty_column =
      formula::first_window_in_padding(input.size(3), p.out_w, kernel.w, stride.w, padding.w, dilation.w);
  EMBER_CHECK(empty_row < 0 && empty_column < 0, op, ": output size is too small: ", geometry(), " gives ", p.out_h,
              "x", p.out_w, ", but the window of output ", empty_row >= 0 ? "row " : "column ",
              empty_row >= 0 ? empty_row : empty_column, " lies wholly in the padding");
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
  autograd::check_pool_input("adaptive_avg_pool2d", input);
  EMBER_CHECK(output_size.h > 0 && output_size.w > 0, "adaptive_avg_pool2d: output size must be positive, got (",
              output_size.h, ", ", output_size.w, ")");
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
