// Gradients of the view ops and of cat: views route the gradient back through the inverse
// geometry (reshape back, inverse permutation, sum over expanded dims, scatter into a slice).
#include "autograd/function.h"
#include "autograd/ops/ops.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/views.h"

namespace ember::autograd {

namespace {

const char* view_backward_name(ViewSpec::Kind kind) {
  switch (kind) {
    case ViewSpec::Kind::Reshape:
      return "ViewBackward0";
    case ViewSpec::Kind::Permute:
      return "PermuteBackward0";
    case ViewSpec::Kind::Expand:
      return "ExpandBackward0";
    case ViewSpec::Kind::Slice:
      return "SliceBackward0";
    case ViewSpec::Kind::Select:
      return "SelectBackward0";
  }
  return "ViewBackward0";
}

class ViewBackward final : public Node {
 public:
  ViewBackward(const ViewSpec& spec, const Tensor& x)
      : spec_(spec), shape_(x.sizes()), channels_last_(channels_last_order(x)) {}
  std::string name() const override { return view_backward_name(spec_.kind); }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    switch (spec_.kind) {
      case ViewSpec::Kind::Reshape:
        return {g.reshape(shape_)};
      case ViewSpec::Kind::Permute: {
        std::vector<int64_t> inverse(spec_.dims.size());
        for (size_t i = 0; i < spec_.dims.size(); ++i) inverse[spec_.dims[i]] = static_cast<int64_t>(i);
        return {g.permute(inverse)};
      }
      case ViewSpec::Kind::Expand:
        return {sum_to(g, shape_)};
      case ViewSpec::Kind::Slice: {
        Tensor out = zeros_in_input_layout(g);
        copy_into(out.slice(spec_.dim, spec_.start, spec_.end, spec_.step), g);
        return {out};
      }
      case ViewSpec::Kind::Select: {
        Tensor out = zeros_in_input_layout(g);
        copy_into(out.select(spec_.dim, spec_.index), g);
        return {out};
      }
    }
    return {Tensor()};
  }

 private:
  // The input's gradient in the input's layout (channels-last or contiguous), so that its sum with
  // the input's other gradients (a residual block's shortcut and convolution) meets one layout.
  Tensor zeros_in_input_layout(const Tensor& g) const {
    if (!channels_last_) return zeros(shape_, g.options());
    return empty_channels_last(shape_, g.options()).zero_();
  }

  ViewSpec spec_;
  Shape shape_;
  bool channels_last_;
};

class CatBackward final : public Node {
 public:
  CatBackward(const std::vector<Tensor>& inputs, int64_t dim) : dim_(dim) {
    for (const Tensor& t : inputs) {
      sizes_.push_back(t.dim() == 1 && t.numel() == 0 ? -1 : t.size(dim));
      dtypes_.push_back(t.dtype());
    }
  }
  std::string name() const override { return "CatBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    std::vector<Tensor> out;
    int64_t offset = 0;
    for (size_t i = 0; i < sizes_.size(); ++i) {
      if (sizes_[i] < 0) {  // a skipped empty 1-D input
        out.push_back(zeros({0}, TensorOptions(dtypes_[i]).device(g.device())));
        continue;
      }
      out.push_back(needs_input_grad(*this, i) ? g.narrow(dim_, offset, sizes_[i]).to(dtypes_[i]) : Tensor());
      offset += sizes_[i];
    }
    return out;
  }

 private:
  int64_t dim_;
  std::vector<int64_t> sizes_;
  std::vector<DType> dtypes_;
};

}  // namespace

Tensor view(const Tensor& x, const ViewSpec& spec) {
  Tensor y = apply_view(x, spec);
  auto node = std::make_shared<ViewBackward>(spec, x);
  connect(node, {&x});
  return attach(node, y);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ember::cat(tensors, dim);
  }
  int64_t wrapped = dim < 0 ? dim + y.dim() : dim;
  auto node = std::make_shared<CatBackward>(tensors, wrapped);
  connect(node, tensors);
  return attach(node, y);
}

}  // namespace ember::autograd
