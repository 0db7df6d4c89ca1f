// Structural cases: matmul (1-D, 2-D, batched with broadcast batch dims), mm, bmm and the joins and
// splits (cat, stack, split, chunk), each with a reference that moves elements by hand.
#include "tests/core/op_cases.h"

namespace ember::test {

namespace {

using Tensors = std::vector<Tensor>;
using Refs = std::vector<RefTensor>;

// torch.matmul by hand: 1-D operands become [1, K] / [K, 1] and lose that dim again at the end.
RefTensor ref_matmul(const RefTensor& a_in, const RefTensor& b_in) {
  RefTensor a = a_in, b = b_in;
  const bool a_vector = a.shape.size() == 1, b_vector = b.shape.size() == 1;
  if (a_vector) a.shape.insert(a.shape.begin(), 1);
  if (b_vector) b.shape.push_back(1);
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  Shape batch_a(a.shape.begin(), a.shape.end() - 2), batch_b(b.shape.begin(), b.shape.end() - 2);
  Shape batch = *broadcast_all({batch_a, batch_b});
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {m, n});
  RefTensor out{out_shape, a.dtype, {}};
  for_each_index(out_shape, [&](const std::vector<int64_t>& index) {
    const int64_t i = index[index.size() - 2], j = index.back();
    std::vector<int64_t> ai = index, bi = index;
    double sum = 0;
    for (int64_t p = 0; p < k; ++p) {
      ai[ai.size() - 1] = p;
      bi[bi.size() - 2] = p;
      ai[ai.size() - 2] = i;
      bi[bi.size() - 1] = j;
      sum += broadcast_at(a, ai) * broadcast_at(b, bi);
    }
    out.values.push_back(sum);
  });
  if (a_vector) out.shape.erase(out.shape.end() - 2);
  if (b_vector) out.shape.pop_back();
  return out;
}

// The part of x with index in [start, start + length) along `dim`.
RefTensor ref_narrow(const RefTensor& x, int64_t dim, int64_t start, int64_t length) {
  RefTensor out{x.shape, x.dtype, {}};
  out.shape[dim] = length;
  for_each_index(out.shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> at = index;
    at[dim] += start;
    out.values.push_back(x.at(at));
  });
  return out;
}

RefTensor ref_cat(const Refs& parts, int64_t dim, DType dtype) {
  Shape shape = parts[0].shape;
  shape[dim] = 0;
  for (const RefTensor& p : parts) shape[dim] += p.shape[dim];
  RefTensor out{shape, dtype, {}};
  for_each_index(shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> at = index;
    size_t part = 0;
    while (at[dim] >= parts[part].shape[dim]) at[dim] -= parts[part++].shape[dim];
    out.values.push_back(parts[part].at(at));
  });
  return out;
}

Refs ref_split(const RefTensor& x, int64_t dim, int64_t split_size) {
  const int64_t n = x.shape[dim];
  if (n == 0) return {x};
  Refs parts;
  for (int64_t start = 0; start < n; start += split_size)
    parts.push_back(ref_narrow(x, dim, start, std::min(split_size, n - start)));
  return parts;
}

}  // namespace

std::vector<OpCase> structural_cases() {
  std::vector<OpCase> cases;

  OpCase matmul_case;
  matmul_case.name = "matmul";
  matmul_case.dtypes = kFloatingDTypes;
  matmul_case.inputs = {InputSpec{{-1.0, 1.0}}};
  matmul_case.shapes = matmul_shapes();
  matmul_case.sum_terms = [](const std::vector<Shape>& s, const OpArgs&) { return s[0].back(); };
  matmul_case.run = [](const Tensors& x, const OpArgs&) { return Tensors{x[0].matmul(x[1])}; };
  matmul_case.reference = [](const Refs& x, const OpArgs&) { return Refs{ref_matmul(x[0], x[1])}; };
  cases.push_back(matmul_case);

  // Sums long enough that a 16-bit accumulator would err by many of the output's units in the last
  // place (the derived tolerance allows float32 accumulation): odd K, few outputs.
  OpCase long_k = matmul_case;
  long_k.name = "matmul_long_k";
  long_k.ops = {"matmul"};
  long_k.dtypes = {kBFloat16, kFloat16};
  long_k.shapes = [](Rng& rng, OpArgs&, bool) {
    const int64_t m = rng.pick<int64_t>({1, 3, 5}), n = rng.pick<int64_t>({2, 3}),
                  k = rng.pick<int64_t>({67, 131, 257});
    if (rng.chance(0.5)) return std::vector<Shape>{{m, k}, {k, n}};
    return std::vector<Shape>{{2, m, k}, {2, k, n}};
  };
  cases.push_back(long_k);

  for (bool batched : {false, true}) {
    OpCase c;
    c.name = batched ? "bmm" : "mm";
    c.dtypes = kFloatingDTypes;
    c.inputs = {InputSpec{{-1.0, 1.0}}};
    c.shapes = [batched](Rng& rng, OpArgs&, bool allow_empty) {
      auto size = [&] { return allow_empty && rng.chance(0.05) ? 0 : rng.integer(1, 5); };
      const int64_t m = size(), k = size(), n = size();
      if (!batched) return std::vector<Shape>{{m, k}, {k, n}};
      const int64_t b = size();
      return std::vector<Shape>{{b, m, k}, {b, k, n}};
    };
    c.sum_terms = [](const std::vector<Shape>& s, const OpArgs&) { return s[0].back(); };
    c.run = [batched](const Tensors& x, const OpArgs&) { return Tensors{batched ? bmm(x[0], x[1]) : mm(x[0], x[1])}; };
    c.reference = [](const Refs& x, const OpArgs&) { return Refs{ref_matmul(x[0], x[1])}; };
    cases.push_back(c);
  }

  for (int inputs : {1, 2, 3}) {
    OpCase c;
    c.name = "cat_" + std::to_string(inputs);
    c.exact = true;
    c.ops = {"cat"};
    c.dtypes = kAllDTypes;
    c.inputs = {InputSpec{{-3.0, 3.0}}};
    c.shapes = cat_shapes(inputs);
    c.run = [](const Tensors& x, const OpArgs& a) { return Tensors{cat(x, a.dims[0])}; };
    c.reference = [](const Refs& x, const OpArgs& a) {
      return Refs{ref_cat(x, wrap(a.dims[0], static_cast<int64_t>(x[0].shape.size())), x[0].dtype)};
    };
    cases.push_back(c);
  }

  OpCase stack_case;
  stack_case.name = "stack";
  stack_case.exact = true;
  stack_case.dtypes = kAllDTypes;
  stack_case.inputs = {InputSpec{{-3.0, 3.0}}};
  stack_case.shapes = stack_shapes(3);
  stack_case.run = [](const Tensors& x, const OpArgs& a) { return Tensors{stack(x, a.dims[0])}; };
  stack_case.reference = [](const Refs& x, const OpArgs& a) {
    // stack is cat of the inputs, each with a new size-1 dim at the stack position.
    const int64_t dim = wrap(a.dims[0], static_cast<int64_t>(x[0].shape.size()) + 1);
    Refs expanded = x;
    for (RefTensor& r : expanded) r.shape.insert(r.shape.begin() + dim, 1);
    return Refs{ref_cat(expanded, dim, x[0].dtype)};
  };
  cases.push_back(stack_case);

  for (bool is_chunk : {false, true}) {
    OpCase c;
    c.name = is_chunk ? "chunk" : "split";
    c.exact = true;
    c.dtypes = kAllDTypes;
    c.inputs = {InputSpec{{-3.0, 3.0}}};
    c.shapes = split_shapes();
    c.run = [is_chunk](const Tensors& x, const OpArgs& a) {
      return is_chunk ? x[0].chunk(a.count, a.dims[0]) : x[0].split(a.count, a.dims[0]);
    };
    c.reference = [is_chunk](const Refs& x, const OpArgs& a) {
      const int64_t dim = wrap(a.dims[0], static_cast<int64_t>(x[0].shape.size()));
      int64_t size = a.count;
      if (is_chunk) size = std::max<int64_t>(1, (x[0].shape[dim] + a.count - 1) / a.count);
      return ref_split(x[0], dim, size);
    };
    cases.push_back(c);
  }
  return cases;
}

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> all;
  for (auto family : {unary_cases, binary_cases, reduction_cases, structural_cases, copy_cases, pool_cases, index_cases,
                      normalization_cases, conv_cases, functional_cases})
    for (OpCase& c : family()) all.push_back(std::move(c));
  return all;
}

}  // namespace ember::test
