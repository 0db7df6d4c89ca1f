// conv2d: forward, backward-data and backward-weight, all through the backend's kernel table.
#include "autograd/function.h"
#include "autograd/functional.h"
#include "core/autocast.h"
#include "autograd/saved.h"
#include "core/autograd_hooks.h"
#include "core/backend.h"
#include "core/device_check.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember {

Size2::Size2(std::initializer_list<int64_t> values) {
  EMBER_CHECK(values.size() == 1 || values.size() == 2, "Size2: expected 1 or 2 values, got ", values.size());
  h = *values.begin();
  w = values.size() == 2 ? *(values.begin() + 1) : h;
}

namespace autograd {
namespace {

class Conv2dBackward final : public Node {
 public:
  Conv2dBackward(const Tensor& input, const Tensor& weight, bool has_bias, const ConvParams& p)
      : input_(input),
        weight_(weight),
        input_shape_(input.sizes()),
        weight_shape_(weight.sizes()),
        has_bias_(has_bias),
        params_(p) {}
  std::string name() const override { return "ConvolutionBackward0"; }
  std::string forward_op() const override { return "conv2d"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    const KernelTable& k = kernels_for(g.device(), "conv2d backward");
    Tensor grad_input, grad_weight, grad_bias;
    if (needs_input_grad(*this, 0))
      grad_input = k.conv2d_backward_input(g, weight_.unpack(name()), input_shape_, params_);
    if (needs_input_grad(*this, 1) || (has_bias_ && needs_input_grad(*this, 2))) {
      auto [gw, gb] = k.conv2d_backward_weight(g, input_.unpack(name()), weight_shape_, has_bias_, params_);
      grad_weight = gw;
      grad_bias = gb;
    }
    return {grad_input, grad_weight, grad_bias};
  }
  void release_saved() override {
    input_.reset();
    weight_.reset();
  }

 private:
  SavedTensor input_, weight_;
  Shape input_shape_, weight_shape_;
  bool has_bias_;
  ConvParams params_;
};

}  // namespace
}  // namespace autograd

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
              Size2 dilation, int64_t groups) {
  if (autocast::Scope cast{autocast::Op::conv2d, {&input, &weight, &bias}})
    return conv2d(cast[0], cast[1], cast[2], stride, padding, dilation, groups);
  common_device("conv2d", {{input, "input"}, {weight, "weight"}, {bias, "bias"}});
  EMBER_CHECK(input.dim() == 4, "conv2d: input must be 4-D [N, C, H, W], got ", shape_str(input.sizes()));
  EMBER_CHECK(weight.dim() == 4, "conv2d: weight must be 4-D [O, C/groups, KH, KW], got ", shape_str(weight.sizes()));
  EMBER_CHECK(groups > 0 && input.size(1) % groups == 0 && weight.size(0) % groups == 0, "conv2d: groups (", groups,
              ") must divide the input channels (", input.size(1), ") and the output channels (", weight.size(0), ")");
  EMBER_CHECK(weight.size(1) * groups == input.size(1), "conv2d: expected input with ", weight.size(1) * groups,
              " channels for weight of shape ", shape_str(weight.sizes()), " and groups=", groups, ", got input ",
              shape_str(input.sizes()));
  EMBER_CHECK(input.dtype() == weight.dtype() && is_floating(input.dtype()),
              "conv2d: expected input and weight of the same floating dtype, got ", dtype_name(input.dtype()), " and ",
              dtype_name(weight.dtype()));
  EMBER_CHECK(stride.h > 0 && stride.w > 0 && dilation.h > 0 && dilation.w > 0 && padding.h >= 0 && padding.w >= 0,
              "conv2d: stride and dilation must be positive and padding non-negative");
  if (bias.defined()) {
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "conv2d: expected bias of shape [", weight.size(0),
                "], got ", shape_str(bias.sizes()));
  }
  const int64_t eff_h = dilation.h * (weight.size(2) - 1) + 1, eff_w = dilation.w * (weight.size(3) - 1) + 1;
  EMBER_CHECK(input.size(2) + 2 * padding.h >= eff_h && input.size(3) + 2 * padding.w >= eff_w,
              "conv2d: the padded input (", input.size(2) + 2 * padding.h, "x", input.size(3) + 2 * padding.w,
              ") is smaller than the dilated kernel (", eff_h, "x", eff_w, ")");
  ConvParams p;
  p.stride_h = stride.h;
  p.stride_w = stride.w;
  p.pad_h = padding.h;
  p.pad_w = padding.w;
  p.dilation_h = dilation.h;
  p.dilation_w = dilation.w;
  p.groups = groups;
  Tensor out;
  {
    NoGradGuard no_grad;
    out = kernels_for(input.device(), "conv2d").conv2d(input, weight, bias, p);
  }
  if (!needs_grad({&input, &weight, &bias})) return out;
  auto node = std::make_shared<autograd::Conv2dBackward>(input, weight, bias.defined(), p);
  autograd::connect(node, {&input, &weight, &bias});
  return autograd::attach(node, out);
}

}  // namespace ember
