// In-place ops beyond the op table: every one bumps the version counter exactly once (and
// out-of-place ops never do), the dtype rules for writing a result back, aliasing operands.
#include <catch2/catch.hpp>

#include "core/ember_core.h"

using namespace ember;

TEST_CASE("each in-place op bumps the shared version counter once") {
  struct Op {
    const char* name;
    std::function<void(Tensor&)> apply;
  };
  const Tensor other = full({3}, 2.0);
  const std::vector<Op> ops = {
      {"add_", [&](Tensor& t) { t.add_(other); }},
      {"add_ alpha", [&](Tensor& t) { t.add_(other, 3); }},
      {"add_ scalar", [](Tensor& t) { t.add_(1.5); }},
      {"sub_", [&](Tensor& t) { t.sub_(other); }},
      {"mul_", [&](Tensor& t) { t.mul_(other); }},
      {"mul_ scalar", [](Tensor& t) { t.mul_(2); }},
      {"div_", [&](Tensor& t) { t.div_(other); }},
      {"clamp_", [](Tensor& t) { t.clamp_(0, 1); }},
      {"relu_", [](Tensor& t) { t.relu_(); }},
      {"fill_", [](Tensor& t) { t.fill_(4); }},
      {"zero_", [](Tensor& t) { t.zero_(); }},
      {"copy_", [&](Tensor& t) { t.copy_(other); }},
      {"uniform_", [](Tensor& t) { t.uniform_(); }},
      {"normal_", [](Tensor& t) { t.normal_(); }},
      {"bernoulli_", [](Tensor& t) { t.bernoulli_(0.5); }},
      {"+=", [&](Tensor& t) { t += other; }},
      {"-=", [&](Tensor& t) { t -= other; }},
      {"*=", [&](Tensor& t) { t *= other; }},
      {"/=", [&](Tensor& t) { t /= other; }},
  };
  for (const Op& op : ops) {
    INFO(op.name);
    Tensor base = zeros({2, 3});
    Tensor row = base[1];  // through a view: the base sees the bump too
    const uint32_t before = base.version();
    op.apply(row);
    CHECK(base.version() == before + 1);
    CHECK(row.version() == base.version());
  }
  // An in-place op on an empty tensor still counts as a modification.
  Tensor empty_tensor = zeros({0});
  uint32_t before = empty_tensor.version();
  empty_tensor.add_(zeros({0}));
  CHECK(empty_tensor.version() == before + 1);
}

TEST_CASE("out-of-place ops and views leave the version counter alone") {
  Tensor x = ones({2, 3});
  const uint32_t before = x.version();
  Tensor y = x + x;
  y = x.exp().sum({0});
  y = x.t().contiguous();
  y = x.to(kFloat64);
  y = x.clone();
  y.add_(x);  // y is a copy: x's counter is not y's
  y = x.view({3, 2});
  CHECK(x.version() == before);
}

TEST_CASE("in-place results are written back in the destination's dtype") {
  Tensor f = tensor({1.5f, 2.5f});
  f.add_(tensor({0.25, 0.125}));  // float64 operand
  CHECK(f.dtype() == kFloat32);
  CHECK(f.to_vector<float>() == std::vector<float>{1.75f, 2.625f});
  Tensor h = tensor({1.f, 2.f}).to(kFloat16);
  h.mul_(tensor({3.f, 0.5f}).to(kBFloat16));  // computed in float32, rounded into float16
  CHECK(h.dtype() == kFloat16);
  CHECK(h.to_vector<float>() == std::vector<float>{3.f, 1.f});
  Tensor i = tensor<int32_t>({7, -7});
  i.add_(tensor<int64_t>({1, 1}));
  CHECK(i.dtype() == kInt32);
  CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{8, -6});
  Tensor d = tensor({1.0, 2.0});
  d.add_(tensor<int64_t>({1, 2}));  // integers into floats are fine
  CHECK(d.to_vector<double>() == std::vector<double>{2.0, 4.0});
  Tensor b = tensor(std::vector<bool>{false, true});
  b.add_(tensor(std::vector<bool>{true, false}));  // bool + bool is logical or
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, true});
  Tensor u = tensor<uint8_t>({250});
  u.add_(10);  // wraps like uint8 arithmetic
  CHECK(u.item<int64_t>() == 4);
}

TEST_CASE("copy_ casts and broadcasts into any destination") {
  Tensor dst = zeros({2, 3}, kInt32);
  dst.copy_(tensor({1.9f, -2.9f, 3.5f}));
  CHECK(dst.to_vector<int32_t>() == std::vector<int32_t>{1, -2, 3, 1, -2, 3});
  Tensor column_view = zeros({3, 4}).t()[2];  // a strided row of the transpose
  column_view.copy_(full({}, 6, kUInt8));
  CHECK(column_view.to_vector<float>() == std::vector<float>{6, 6, 6});
  Tensor flags = zeros({3}, kBool);
  flags.copy_(tensor({0.0, 0.1, -3.0}));
  CHECK(flags.to_vector<bool>() == std::vector<bool>{false, true, true});
}

TEST_CASE("operands may alias the destination") {
  Tensor x = tensor({1.f, 2.f, 3.f});
  x.add_(x);
  CHECK(x.to_vector<float>() == std::vector<float>{2, 4, 6});
  x.mul_(x);
  CHECK(x.to_vector<float>() == std::vector<float>{4, 16, 36});
  Tensor m = arange(0, 6, 1, TensorOptions(kFloat32)).view({2, 3});
  m.sub_(m[0]);  // row 0 is an operand of every row, and is itself overwritten first
  CHECK(m.to_vector<float>() == std::vector<float>{0, 0, 0, 3, 3, 3});
  Tensor sq = arange(0, 4, 1, TensorOptions(kFloat32)).view({2, 2});
  sq.copy_(sq.t());
  CHECK(sq.to_vector<float>() == std::vector<float>{0, 2, 1, 3});
  Tensor v = arange(0, 5, 1, TensorOptions(kFloat32));
  v.slice(0, 1, 5).copy_(v.slice(0, 0, 4));  // a shifted copy, as numpy's v[1:] = v[:-1]
  CHECK(v.to_vector<float>() == std::vector<float>{0, 0, 1, 2, 3});
}

TEST_CASE("clamp_ with only one bound and in-place ops on scalars") {
  Tensor x = tensor({-2.f, 0.5f, 3.f});
  x.clamp_(std::nullopt, 1);
  CHECK(x.to_vector<float>() == std::vector<float>{-2, 0.5f, 1});
  x.clamp_(-1, std::nullopt);
  CHECK(x.to_vector<float>() == std::vector<float>{-1, 0.5f, 1});
  Tensor s = full({}, 2.0);
  s.mul_(full({}, 4.0));
  s.add_(1);
  CHECK(s.item<float>() == 9.0f);
}

TEST_CASE("fill_ writes only the view's elements") {
  Tensor x = zeros({4, 4});
  x.slice(0, 0, 4, 2).slice(1, 1, 4, 2).fill_(1);
  CHECK(x.to_vector<float>() == std::vector<float>{0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0});
  x.t()[0].fill_(7);
  CHECK(x.select(1, 0).to_vector<float>() == std::vector<float>{7, 7, 7, 7});
  CHECK(x.select(1, 1).to_vector<float>() == std::vector<float>{1, 0, 1, 0});
}
