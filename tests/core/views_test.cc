// View ops: geometry (sizes, strides, offsets), storage sharing, write-through, the shared version
// counter, is_contiguous, and when reshape must copy.
#include <catch2/catch.hpp>

#include "core/ember_core.h"

using namespace ember;

namespace {

Tensor iota(const Shape& shape) { return arange(0, shape_numel(shape), 1, TensorOptions(kFloat32)).view(shape); }
std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }
bool shares_storage(const Tensor& a, const Tensor& b) { return a.storage() == b.storage(); }

}  // namespace

TEST_CASE("view and reshape share storage when the strides allow it") {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.view({6, -1});
  CHECK(v.sizes() == Shape{6, 4});
  CHECK(v.strides() == Shape{4, 1});
  CHECK(shares_storage(v, x));
  CHECK(shares_storage(x.reshape({4, 6}), x));
  CHECK(x.reshape({-1}).sizes() == Shape{24});

  // A step slice of the outer dim still lets the inner dims merge.
  Tensor rows = x.slice(0, 0, 2, 2);  // [1, 3, 4]
  Tensor merged = rows.reshape({12});
  CHECK(shares_storage(merged, x));
  CHECK(values(merged) == values(x.select(0, 0).flatten()));

  // Transposed or expanded data cannot be flattened in place: reshape copies.
  Tensor xt = x.transpose(1, 2);
  Tensor flat = xt.reshape({24});
  CHECK_FALSE(shares_storage(flat, x));
  CHECK(flat.is_contiguous());
  std::vector<float> expected;
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j) expected.push_back(static_cast<float>(i * 12 + j * 4 + k));
  CHECK(values(flat) == expected);
  Tensor expanded = iota({3}).expand({2, 3});
  Tensor copied = expanded.reshape({6});
  CHECK_FALSE(shares_storage(copied, expanded));
  CHECK(values(copied) == std::vector<float>{0, 1, 2, 0, 1, 2});
  // ...but a transposed tensor can still split or merge dims that stay adjacent in memory.
  CHECK(shares_storage(xt.reshape({2, 2, 2, 3}), x));
}

TEST_CASE("view rejects shapes the strides cannot express") {
  Tensor xt = iota({3, 4}).t();
  CHECK_THROWS_WITH(xt.view({12}), Catch::Contains("view") && Catch::Contains("[12]") && Catch::Contains("[4, 3]") &&
                                       Catch::Contains("stride [1, 4]"));
  CHECK_THROWS_WITH(iota({3, 4}).view({5, -1}),
                    Catch::Contains("view") && Catch::Contains("[5, -1]") && Catch::Contains("12"));
  CHECK_THROWS_WITH(iota({3, 4}).view({-1, -1}), Catch::Contains("only one dimension can be inferred"));
}

TEST_CASE("views of 0-dim and empty tensors") {
  Tensor s = full({}, 7.0);
  CHECK(s.view({1, 1}).sizes() == Shape{1, 1});
  CHECK(s.reshape({-1}).sizes() == Shape{1});
  CHECK(s.unsqueeze(0).sizes() == Shape{1});
  CHECK(s.flatten().sizes() == Shape{1});
  CHECK(s.view({1}).view({}).item<float>() == 7.0f);

  Tensor e = zeros({0, 3});
  CHECK(e.view({3, 0}).sizes() == Shape{3, 0});
  CHECK(e.reshape({0, 1, 3}).sizes() == Shape{0, 1, 3});
  CHECK(e.t().sizes() == Shape{3, 0});
  CHECK(e.is_contiguous());
  CHECK(e.t().is_contiguous());  // nothing to lay out
}

TEST_CASE("permute, transpose and t reorder sizes and strides") {
  Tensor x = iota({2, 3, 4});
  Tensor p = x.permute({2, 0, 1});
  CHECK(p.sizes() == Shape{4, 2, 3});
  CHECK(p.strides() == Shape{1, 12, 4});
  CHECK(shares_storage(p, x));
  CHECK_FALSE(p.is_contiguous());
  CHECK(p.select(0, 1).select(0, 1).select(0, 2).item<float>() == 12 + 8 + 1);
  CHECK(x.permute({-1, -3, -2}).sizes() == Shape{4, 2, 3});
  CHECK(x.transpose(0, -1).sizes() == Shape{4, 3, 2});
  CHECK(x.transpose(0, -1).strides() == Shape{1, 4, 12});

  Tensor m = iota({2, 3});
  CHECK(m.t().sizes() == Shape{3, 2});
  CHECK(values(m.t().contiguous()) == std::vector<float>{0, 3, 1, 4, 2, 5});
  Tensor v = iota({3});
  CHECK(v.t().is_same(v));
  CHECK(m.t().t().strides() == m.strides());
  CHECK_THROWS_WITH(x.permute({0, 0, 1}), Catch::Contains("permute") && Catch::Contains("repeated dim"));
  CHECK_THROWS_WITH(x.permute({0, 1}), Catch::Contains("permute") && Catch::Contains("expected 3"));
}

TEST_CASE("narrow and slice with steps and negative indices") {
  Tensor x = iota({10});
  CHECK(values(x.slice(0, 1, 8, 3)) == std::vector<float>{1, 4, 7});
  CHECK(values(x.slice(0, -4, -1)) == std::vector<float>{6, 7, 8});
  CHECK(values(x.slice(0, -3, 10, 2)) == std::vector<float>{7, 9});
  CHECK(x.slice(0, 8, 3).numel() == 0);                            // empty, not an error
  CHECK(values(x.slice(0, -100, 2)) == std::vector<float>{0, 1});  // clamped like Python
  CHECK(x.slice(0, 1, 8, 3).strides() == Shape{3});
  CHECK(x.slice(0, 1, 8, 3).storage_offset() == 1);
  CHECK(values(x.narrow(0, -3, 2)) == std::vector<float>{7, 8});
  CHECK(values(x.narrow(0, 2, 0)).empty());

  Tensor m = iota({4, 5});
  Tensor s = m.slice(1, 1, 5, 2);  // columns 1 and 3
  CHECK(s.sizes() == Shape{4, 2});
  CHECK(s.strides() == Shape{5, 2});
  CHECK_FALSE(s.is_contiguous());
  CHECK(values(s) == std::vector<float>{1, 3, 6, 8, 11, 13, 16, 18});
  CHECK(values(m.slice(0, 1, 4, 2).slice(1, -2, 5)) == std::vector<float>{8, 9, 18, 19});
  CHECK_THROWS_WITH(x.narrow(0, 8, 3), Catch::Contains("narrow") && Catch::Contains("exceeds dimension size (10)"));
  CHECK_THROWS_WITH(x.slice(0, 0, 5, 0), Catch::Contains("slice: step must be positive, got 0"));
}

TEST_CASE("select and operator[] drop a dim, with negative indices") {
  Tensor m = iota({3, 4});
  CHECK(values(m[1]) == std::vector<float>{4, 5, 6, 7});
  CHECK(values(m[-1]) == std::vector<float>{8, 9, 10, 11});
  CHECK(values(m.select(1, -2)) == std::vector<float>{2, 6, 10});
  CHECK(m.select(1, 2).strides() == Shape{4});
  CHECK(m.select(1, 2).storage_offset() == 2);
  CHECK(m[2][3].dim() == 0);
  CHECK(m[2][3].item<float>() == 11);
  CHECK_THROWS_WITH(m.select(0, 3),
                    Catch::Contains("select") && Catch::Contains("index 3 out of range") && Catch::Contains("[3, 4]"));
  CHECK_THROWS_WITH(m[-4], Catch::Contains("index -4 out of range"));
}

TEST_CASE("expand broadcasts with zero strides") {
  Tensor col = iota({3, 1});
  Tensor e = col.expand({2, 3, 4});
  CHECK(e.sizes() == Shape{2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(shares_storage(e, col));
  CHECK_FALSE(e.is_contiguous());
  CHECK(e.select(0, 1).select(0, 2).select(0, 3).item<float>() == 2);
  CHECK(col.expand({-1, 5}).sizes() == Shape{3, 5});
  CHECK(iota({}).expand({2, 2}).strides() == Shape{0, 0});
  CHECK(iota({1}).expand({0}).numel() == 0);
  CHECK(col.expand_as(zeros({3, 7})).sizes() == Shape{3, 7});
  CHECK_THROWS_WITH(col.expand({4, 4}),
                    Catch::Contains("expand") && Catch::Contains("(4)") && Catch::Contains("existing size (3)"));
  CHECK_THROWS_WITH(col.expand({3}), Catch::Contains("expand") && Catch::Contains("number of sizes provided (1)"));
}

TEST_CASE("squeeze, unsqueeze, flatten and unflatten") {
  Tensor x = iota({1, 3, 1, 2});
  CHECK(x.squeeze().sizes() == Shape{3, 2});
  CHECK(x.squeeze(2).sizes() == Shape{1, 3, 2});
  CHECK(x.squeeze(-4).sizes() == Shape{3, 1, 2});
  CHECK(x.squeeze(1).sizes() == x.sizes());  // not size 1: unchanged
  CHECK(x.unsqueeze(-1).sizes() == Shape{1, 3, 1, 2, 1});
  CHECK(x.unsqueeze(0).sizes() == Shape{1, 1, 3, 1, 2});
  CHECK(shares_storage(x.squeeze(), x));

  Tensor y = iota({2, 3, 4, 5});
  CHECK(y.flatten().sizes() == Shape{120});
  CHECK(y.flatten(1, 2).sizes() == Shape{2, 12, 5});
  CHECK(y.flatten(-2).sizes() == Shape{2, 3, 20});
  CHECK(shares_storage(y.flatten(1, 2), y));
  CHECK(y.unflatten(-1, {5, 1}).sizes() == Shape{2, 3, 4, 5, 1});
  CHECK(y.unflatten(1, {-1, 1}).sizes() == Shape{2, 3, 1, 4, 5});
  Tensor yt = y.transpose(1, 2);  // flatten of non-adjacent dims must copy the right values
  Tensor f = yt.flatten(1, 2);
  CHECK(f.sizes() == Shape{2, 12, 5});
  CHECK(f.select(0, 1).select(0, 1).select(0, 0).item<float>() == 60 + 20);  // (i=1, k=0, j=1)
  CHECK_THROWS_WITH(y.flatten(2, 1), Catch::Contains("flatten") && Catch::Contains("start_dim"));
  CHECK_THROWS_WITH(y.unflatten(1, {2, 2}), Catch::Contains("unflatten") && Catch::Contains("[2, 2]"));
}

TEST_CASE("contiguous copies only non-contiguous tensors") {
  Tensor x = iota({3, 4});
  CHECK(x.contiguous().is_same(x));
  Tensor t = x.t();
  Tensor c = t.contiguous();
  CHECK_FALSE(shares_storage(c, x));
  CHECK(c.is_contiguous());
  CHECK(c.strides() == Shape{3, 1});
  CHECK(values(c) == values(t));

  // Size-1 dims do not count against contiguity, whatever their stride.
  Tensor row = x.slice(0, 1, 2);  // [1, 4]
  CHECK(row.is_contiguous());
  Tensor col = x.slice(1, 2, 3);  // [3, 1] with stride 4 along dim 0
  CHECK_FALSE(col.is_contiguous());
  CHECK(x.select(1, 0).unsqueeze(1).sizes() == Shape{3, 1});
  CHECK(x[1].is_contiguous());
}

TEST_CASE("views write through to their base and share its version counter") {
  Tensor x = zeros({3, 4});
  const uint32_t v0 = x.version();
  Tensor column = x.select(1, 2);
  column.fill_(5);
  CHECK(x.version() == v0 + 1);
  CHECK(column.version() == x.version());
  Tensor block = x.slice(0, 0, 3, 2).slice(1, 0, 2);
  block.add_(ones({2, 2}));
  CHECK(x.version() == v0 + 2);
  CHECK(values(x) == std::vector<float>{1, 1, 5, 0, 0, 0, 5, 0, 1, 1, 5, 0});

  Tensor through_t = x.t();
  through_t[3].fill_(-1);  // column 3 of x
  CHECK(values(x.select(1, 3)) == std::vector<float>{-1, -1, -1});
  Tensor d = x.detach();
  d.zero_();
  CHECK(values(x) == std::vector<float>(12, 0.0f));
  CHECK(x.version() == d.version());

  // A copy does not share: writing to it leaves x and x's version alone.
  Tensor c = x.clone();
  const uint32_t before = x.version();
  c.fill_(3);
  CHECK(x.version() == before);
  CHECK(values(x) == std::vector<float>(12, 0.0f));
}

TEST_CASE("split, chunk and unbind return views") {
  Tensor x = iota({7, 2});
  auto parts = x.split(3);
  REQUIRE(parts.size() == 3);
  CHECK(parts[2].sizes() == Shape{1, 2});
  CHECK(shares_storage(parts[1], x));
  CHECK(parts[1].storage_offset() == 6);
  auto sized = x.split_with_sizes({2, 0, 5});
  CHECK(sized[1].numel() == 0);
  CHECK(values(sized[2][0]) == std::vector<float>{4, 5});
  CHECK(x.chunk(3).size() == 3);
  CHECK(x.chunk(3)[0].size(0) == 3);
  CHECK(x.chunk(10).size() == 7);
  CHECK(x.chunk(2, 1)[1].strides() == Shape{2, 1});
  auto rows = x.unbind(1);
  REQUIRE(rows.size() == 2);
  CHECK(values(rows[1]) == std::vector<float>{1, 3, 5, 7, 9, 11, 13});
  parts[0].fill_(9);
  CHECK(x[0][0].item<float>() == 9);
  CHECK_THROWS_WITH(x.split_with_sizes({2, 2}),
                    Catch::Contains("split_with_sizes") && Catch::Contains("[2, 2]") && Catch::Contains("(7)"));
}
