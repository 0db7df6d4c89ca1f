// Indexing cases: gather and scatter_add along any dim (negative dims too, index smaller than
// the input in the other dims, src larger than the index), embedding with int64 and int32 rows
// and its backward. Index values come from a few small numbers, so entries repeat and
// scatter_add must add, not assign. The references move elements by hand.
#include "autograd/functional.h"
#include "tests/core/op_cases.h"

namespace ember::test {

namespace {

using Tensors = std::vector<Tensor>;
using Refs = std::vector<RefTensor>;

// Index values are 0 .. kIndexValues - 1, and the indexed dim always holds at least that many.
constexpr int64_t kIndexValues = 3;
const ValueRange kIndexRange{0.0, kIndexValues - 1.0, true};
// Whole numbers: 16-bit sums of them are exact in any order (the CUDA kernel adds atomically).
const ValueRange kWhole{-3.0, 3.0, true};

int64_t draw_length(Rng& rng, int64_t low, int64_t high, bool allow_empty) {
  return allow_empty && rng.chance(0.05) ? 0 : rng.integer(low, high);
}

// {self, index} or, with src, {self, index, src}: index no larger than self except along dim,
// src at least index's size everywhere. params[0] is the dim, negative at times.
ShapeGenerator index_shapes(bool with_src) {
  return [=](Rng& rng, OpArgs& a, bool allow_empty) {
    const int64_t rank = rng.integer(1, 4), dim = rng.integer(0, rank - 1);
    Shape self(static_cast<size_t>(rank)), index = self, src = self;
    for (int64_t d = 0; d < rank; ++d) {
      self[d] = d == dim ? rng.integer(kIndexValues, kIndexValues + 2) : draw_length(rng, 1, 4, allow_empty);
      index[d] = d == dim ? draw_length(rng, 1, 5, allow_empty) : rng.integer(std::min<int64_t>(self[d], 1), self[d]);
      src[d] = index[d] + rng.integer(0, 1);
    }
    a.params = {rng.chance(0.3) ? dim - rank : dim};
    return with_src ? std::vector<Shape>{self, index, src} : std::vector<Shape>{self, index};
  };
}

// The element of `x` at `at` with at[dim] replaced by the index value `j`.
std::vector<int64_t> along(std::vector<int64_t> at, int64_t dim, double j) {
  at[dim] = static_cast<int64_t>(j);
  return at;
}

RefTensor ref_gather(const RefTensor& x, int64_t dim, const RefTensor& index) {
  RefTensor out{index.shape, x.dtype, {}};
  for_each_index(index.shape,
                 [&](const std::vector<int64_t>& at) { out.values.push_back(x.at(along(at, dim, index.at(at)))); });
  return out;
}

RefTensor ref_scatter_add(const RefTensor& self, int64_t dim, const RefTensor& index, const RefTensor& src) {
  RefTensor out = self;
  for_each_index(index.shape, [&](const std::vector<int64_t>& at) {
    out.values[static_cast<size_t>(flat_index(self.shape, along(at, dim, index.at(at))))] += src.at(at);
  });
  return out;
}

// {weight [rows, width], indices} and, with_grad, the output gradient [indices..., width].
ShapeGenerator embedding_shapes(bool with_grad) {
  return [=](Rng& rng, OpArgs&, bool allow_empty) {
    const Shape weight = {rng.integer(kIndexValues, kIndexValues + 3), rng.integer(1, 5)};
    Shape indices(static_cast<size_t>(rng.integer(0, 3)));
    for (int64_t& s : indices) s = draw_length(rng, 1, 4, allow_empty);
    Shape grad = indices;
    grad.push_back(weight[1]);
    return with_grad ? std::vector<Shape>{weight, indices, grad} : std::vector<Shape>{weight, indices};
  };
}

RefTensor ref_embedding(const RefTensor& weight, const RefTensor& indices) {
  Shape shape = indices.shape;
  shape.push_back(weight.shape[1]);
  RefTensor out{shape, weight.dtype, {}};
  for (double row : indices.values)
    for (int64_t j = 0; j < weight.shape[1]; ++j) out.values.push_back(weight.at({static_cast<int64_t>(row), j}));
  return out;
}

RefTensor ref_embedding_backward(const RefTensor& weight, const RefTensor& indices, const RefTensor& grad) {
  RefTensor dw{weight.shape, grad.dtype, std::vector<double>(weight.values.size(), 0.0)};
  const int64_t width = weight.shape[1];
  for (size_t r = 0; r < indices.values.size(); ++r)
    for (int64_t j = 0; j < width; ++j)
      dw.values[static_cast<size_t>(static_cast<int64_t>(indices.values[r]) * width + j)] +=
          grad.values[r * static_cast<size_t>(width) + static_cast<size_t>(j)];
  return dw;
}

int64_t dim_of(const OpArgs& a, const Shape& shape) { return wrap(a.params[0], static_cast<int64_t>(shape.size())); }

}  // namespace

std::vector<OpCase> index_cases() {
  std::vector<OpCase> cases;

  OpCase gather_case;
  gather_case.name = "gather";
  gather_case.dtypes = kAllDTypes;
  gather_case.inputs = {InputSpec{{-3.0, 3.0}}, InputSpec{kIndexRange, kInt64}};
  gather_case.shapes = index_shapes(false);
  gather_case.run = [](const Tensors& x, const OpArgs& a) { return Tensors{gather(x[0], a.params[0], x[1])}; };
  gather_case.reference = [](const Refs& x, const OpArgs& a) {
    return Refs{ref_gather(x[0], dim_of(a, x[0].shape), x[1])};
  };
  cases.push_back(gather_case);

  // Whole numbers for every dtype, then uniform values where a sum's rounding is order-free
  // enough for the tolerance (float32 and float64).
  for (bool whole : {true, false}) {
    OpCase c;
    c.name = whole ? "scatter_add" : "scatter_add_uniform";
    c.ops = {"scatter_add"};
    c.dtypes = whole ? kNumericDTypes : std::vector<DType>{kFloat32, kFloat64};
    const ValueRange values = whole ? kWhole : ValueRange{};
    c.inputs = {InputSpec{values}, InputSpec{kIndexRange, kInt64}, InputSpec{values}};
    c.shapes = index_shapes(true);
    c.run = [](const Tensors& x, const OpArgs& a) { return Tensors{scatter_add(x[0], a.params[0], x[1], x[2])}; };
    c.reference = [](const Refs& x, const OpArgs& a) {
      return Refs{ref_scatter_add(x[0], dim_of(a, x[0].shape), x[1], x[2])};
    };
    cases.push_back(c);
  }

  // Thousands of additions into a few destinations, from several blocks at once on a GPU; 16-bit
  // neighbours share the 32-bit word their atomic updates swap. Each destination receives about
  // 170 values of -1, 0 or 1 (all equal when src is expanded): every partial sum, in any order,
  // stays a whole number that bfloat16 holds exactly.
  OpCase contended;
  contended.name = "scatter_add_contended";
  contended.ops = {"scatter_add"};
  contended.dtypes = kNumericDTypes;
  contended.inputs = {InputSpec{{-1.0, 1.0, true}}, InputSpec{kIndexRange, kInt64}, InputSpec{{-1.0, 1.0, true}}};
  contended.shapes = [](Rng&, OpArgs& a, bool) {
    a.params = {0};
    return std::vector<Shape>{{kIndexValues, 8}, {500, 8}, {500, 8}};
  };
  contended.run = [](const Tensors& x, const OpArgs&) { return Tensors{scatter_add(x[0], 0, x[1], x[2])}; };
  contended.reference = [](const Refs& x, const OpArgs&) { return Refs{ref_scatter_add(x[0], 0, x[1], x[2])}; };
  cases.push_back(contended);

  for (DType index_dtype : {kInt64, kInt32}) {
    OpCase c;
    c.name = index_dtype == kInt64 ? "embedding" : "embedding_int32";
    c.ops = {"embedding"};
    c.dtypes = kFloatingDTypes;
    c.inputs = {InputSpec{}, InputSpec{kIndexRange, index_dtype}};
    c.shapes = embedding_shapes(false);
    c.run = [](const Tensors& x, const OpArgs&) { return Tensors{embedding(x[0], x[1])}; };
    c.reference = [](const Refs& x, const OpArgs&) { return Refs{ref_embedding(x[0], x[1])}; };
    cases.push_back(c);
  }

  // The weight's gradient: repeated rows add up (scatter_add with duplicate indices).
  OpCase backward;
  backward.name = "embedding_backward";
  backward.ops = {"embedding", "requires_grad_", "backward"};
  backward.dtypes = kFloatingDTypes;
  backward.inputs = {InputSpec{}, InputSpec{kIndexRange, kInt64}, InputSpec{kWhole}};
  backward.shapes = embedding_shapes(true);
  backward.run = [](const Tensors& x, const OpArgs&) {
    Tensor weight = x[0].detach().requires_grad_();
    embedding(weight, x[1]).backward(x[2]);
    return Tensors{weight.grad()};
  };
  backward.reference = [](const Refs& x, const OpArgs&) { return Refs{ref_embedding_backward(x[0], x[1], x[2])}; };
  cases.push_back(backward);
  return cases;
}

}  // namespace ember::test
