// Index ops: gather and scatter_add (each the other's adjoint) and embedding, a row gather.
#include "autograd/function.h"
#include "autograd/functional.h"
#include "core/autocast.h"
#include "autograd/saved.h"
#include "core/autograd_hooks.h"
#include "core/backend.h"
#include "core/device_check.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember {

namespace {

void check_index(const char* op, const Tensor& self, int64_t dim, const Tensor& index) {
  EMBER_CHECK(index.dtype() == kInt64, op, ": expected an int64 index, got ", dtype_name(index.dtype()));
  EMBER_CHECK(index.dim() == self.dim(), op, ": index must have the same number of dimensions as the input (",
              self.dim(), "), got ", shape_str(index.sizes()));
  for (int64_t d = 0; d < self.dim(); ++d)
    EMBER_CHECK(d == dim || index.size(d) <= self.size(d), op, ": index ", shape_str(index.sizes()),
                " is larger than the input ", shape_str(self.sizes()), " in dimension ", d);
}

Tensor gather_raw(const Tensor& input, int64_t dim, const Tensor& index) {
  Tensor out = empty(index.sizes(), input.options());
  if (out.numel() > 0) kernels_for(input.device(), "gather").gather(out, input, dim, index);
  return out;
}

Tensor scatter_add_raw(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = self.clone();
  if (index.numel() > 0) kernels_for(self.device(), "scatter_add").scatter_add(out, dim, index, src);
  return out;
}

}  // namespace

namespace autograd {
namespace {

class GatherBackward final : public Node {
 public:
  GatherBackward(const Shape& shape, int64_t dim, const Tensor& index) : shape_(shape), dim_(dim), index_(index) {}
  std::string name() const override { return "GatherBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    return {scatter_add_raw(zeros(shape_, g.options()), dim_, index_.unpack(name()), g)};
  }
  void release_saved() override { index_.reset(); }

 private:
  Shape shape_;
  int64_t dim_;
  SavedTensor index_;
};

class ScatterAddBackward final : public Node {
 public:
  ScatterAddBackward(int64_t dim, const Tensor& index, const Shape& src_shape)
      : dim_(dim), index_(index), src_shape_(src_shape) {}
  std::string name() const override { return "ScatterAddBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    if (!needs_input_grad(*this, 1)) return {g, Tensor()};
    const Tensor& index = index_.unpack(name());
    Tensor read = gather_raw(g, dim_, index);
    if (read.sizes() == src_shape_) return {g, read};
    // src may be larger than index in any dim: only its leading index-shaped block was read.
    Tensor grad_src = zeros(src_shape_, g.options()), block = grad_src;
    for (int64_t d = 0; d < index.dim(); ++d) block = block.narrow(d, 0, index.size(d));
    copy_into(block, read);
    return {g, grad_src};
  }
  void release_saved() override { index_.reset(); }

 private:
  int64_t dim_;
  SavedTensor index_;
  Shape src_shape_;
};

class EmbeddingBackward final : public Node {
 public:
  EmbeddingBackward(const Shape& weight_shape, const Tensor& indices, std::optional<int64_t> padding_idx)
      : weight_shape_(weight_shape), indices_(indices), padding_idx_(padding_idx) {}
  std::string name() const override { return "EmbeddingBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    const int64_t dim = weight_shape_[1];
    Tensor rows = indices_.unpack(name()).reshape({-1});
    Tensor g = grads[0].reshape({-1, dim});
    if (padding_idx_) {
      Tensor keep = (rows != full({}, *padding_idx_, TensorOptions(kInt64).device(rows.device()))).to(g.dtype());
      g = g * keep.unsqueeze(1);
    }
    Tensor index = rows.unsqueeze(1).expand({rows.size(0), dim});
    return {scatter_add_raw(zeros(weight_shape_, g.options()), 0, index, g)};
  }
  void release_saved() override { indices_.reset(); }

 private:
  Shape weight_shape_;
  SavedTensor indices_;
  std::optional<int64_t> padding_idx_;
};

}  // namespace
}  // namespace autograd

Tensor gather(const Tensor& input, int64_t dim_in, const Tensor& index) {
  common_device("gather", {{input, "input"}, {index, "index"}});
  int64_t dim = wrap_dim(dim_in, input.dim(), "gather");
  check_index("gather", input, dim, index);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = gather_raw(input, dim, index);
  }
  if (!needs_grad({&input})) return out;
  auto node = std::make_shared<autograd::GatherBackward>(input.sizes(), dim, index);
  autograd::connect(node, {&input});
  return autograd::attach(node, out);
}

Tensor scatter_add(const Tensor& self, int64_t dim_in, const Tensor& index, const Tensor& src) {
  if (autocast::Scope cast{autocast::Op::scatter_add, {&self, &index, &src}})
    return scatter_add(cast[0], dim_in, cast[1], cast[2]);
  common_device("scatter_add", {{self, "self"}, {index, "index"}, {src, "src"}});
  int64_t dim = wrap_dim(dim_in, self.dim(), "scatter_add");
  check_index("scatter_add", self, dim, index);
  EMBER_CHECK(src.dtype() == self.dtype(), "scatter_add: expected src of dtype ", dtype_name(self.dtype()), ", got ",
              dtype_name(src.dtype()));
  for (int64_t d = 0; d < self.dim(); ++d)
    EMBER_CHECK(index.size(d) <= src.size(d), "scatter_add: index ", shape_str(index.sizes()), " is larger than src ",
                shape_str(src.sizes()), " in dimension ", d);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = scatter_add_raw(self, dim, index, src);
  }
  if (!needs_grad({&self, &src})) return out;
  auto node = std::make_shared<autograd::ScatterAddBackward>(dim, index, src.sizes());
  autograd::connect(node, {&self, &src});
  return autograd::attach(node, out);
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  autocast::Hold as_one_op;
  common_device("embedding", {{weight, "weight"}, {indices, "indices"}});
  EMBER_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [num_embeddings, embedding_dim], got ",
              shape_str(weight.sizes()));
  EMBER_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, "embedding: expected integer indices, got ",
              dtype_name(indices.dtype()));
  Tensor rows = indices.to(kInt64).reshape({-1});
  const int64_t dim = weight.size(1);
  Tensor out;
  {
    NoGradGuard no_grad;
    out = gather_raw(weight, 0, rows.unsqueeze(1).expand({rows.size(0), dim}));
  }
  Shape shape = indices.sizes();
  shape.push_back(dim);
  out = out.view(shape);
  if (!needs_grad({&weight})) return out;
  auto node = std::make_shared<autograd::EmbeddingBackward>(weight.sizes(), indices.to(kInt64), padding_idx);
  autograd::connect(node, {&weight});
  return autograd::attach(node, out);
}

}  // namespace ember
