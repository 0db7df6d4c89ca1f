// TensorDataset, Subset, ConcatDataset and SyntheticDataset: sizes, which example each index
// reaches, and the errors for bad indices and mismatched tensors.
#include <catch2/catch.hpp>

#include "core/ember_core.h"
#include "data/dataset.h"
#include "data/synthetic.h"

using namespace ember;
using namespace ember::data;

namespace {

// data[i] = [i, i + 0.5], targets[i] = 10 * i.
std::shared_ptr<TensorDataset> numbered(int64_t n, int64_t offset = 0) {
  std::vector<float> data;
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < n; ++i) {
    data.push_back(static_cast<float>(offset + i));
    data.push_back(static_cast<float>(offset + i) + 0.5f);
    targets.push_back(10 * (offset + i));
  }
  return std::make_shared<TensorDataset>(tensor(data, {n, 2}), tensor(targets, {n}));
}

int64_t label(const Example& e) { return e.target.item<int64_t>(); }

}  // namespace

TEST_CASE("TensorDataset slices its tensors along dim 0", "[dataset]") {
  auto ds = numbered(5);
  REQUIRE(ds->size() == 5);
  Example e = ds->get(3);
  CHECK(e.data.sizes() == Shape{2});
  CHECK(e.data.to_vector<float>() == std::vector<float>{3.0f, 3.5f});
  CHECK(e.target.dim() == 0);
  CHECK(label(e) == 30);
  CHECK_THROWS_WITH(ds->get(5), Catch::Contains("index 5 out of range for a dataset of size 5"));
  CHECK_THROWS_WITH(ds->get(-1), Catch::Contains("index -1 out of range"));
}

TEST_CASE("TensorDataset without targets and with mismatched sizes", "[dataset]") {
  TensorDataset unlabeled(zeros({4, 3}));
  CHECK(unlabeled.size() == 4);
  CHECK_FALSE(unlabeled.get(0).target.defined());
  CHECK_THROWS_WITH(TensorDataset(zeros({4, 3}), zeros({5})),
                    Catch::Contains("same size along dim 0") && Catch::Contains("[4, 3]") && Catch::Contains("[5]"));
}

TEST_CASE("Subset visits the given indices in order", "[dataset]") {
  auto ds = numbered(6);
  Subset subset(ds, {4, 0, 4, 2});
  REQUIRE(subset.size() == 4);
  CHECK(label(subset.get(0)) == 40);
  CHECK(label(subset.get(1)) == 0);
  CHECK(label(subset.get(2)) == 40);
  CHECK(label(subset.get(3)) == 20);
  CHECK_THROWS_WITH(subset.get(4), Catch::Contains("Subset::get: index 4 out of range"));
  CHECK_THROWS_WITH(Subset(ds, {1, 6}), Catch::Contains("indices[1] = 6 is out of range for a dataset of size 6"));
}

TEST_CASE("ConcatDataset chains datasets, empty ones included", "[dataset]") {
  auto a = numbered(3, 0);
  auto empty = numbered(0, 100);
  auto b = numbered(2, 50);
  ConcatDataset all({a, empty, b});
  REQUIRE(all.size() == 5);
  CHECK(label(all.get(0)) == 0);
  CHECK(label(all.get(2)) == 20);
  CHECK(label(all.get(3)) == 500);
  CHECK(label(all.get(4)) == 510);
  CHECK_THROWS_WITH(all.get(5), Catch::Contains("ConcatDataset::get: index 5 out of range"));
  CHECK(ConcatDataset({}).size() == 0);
}

TEST_CASE("SyntheticDataset is deterministic in (seed, index)", "[dataset][synthetic]") {
  SyntheticDataset a(100, {3, 8, 5}, 7, /*seed=*/11);
  SyntheticDataset b(100, {3, 8, 5}, 7, /*seed=*/11);
  SyntheticDataset other_seed(100, {3, 8, 5}, 7, /*seed=*/12);
  REQUIRE(a.size() == 100);
  Example e = a.get(42);
  CHECK(e.data.sizes() == Shape{3, 8, 5});
  CHECK(e.data.dtype() == kUInt8);
  CHECK(e.target.dtype() == kInt64);
  CHECK(e.data.to_vector<uint8_t>() == b.get(42).data.to_vector<uint8_t>());
  CHECK(label(e) == label(b.get(42)));
  CHECK(e.data.to_vector<uint8_t>() != other_seed.get(42).data.to_vector<uint8_t>());
  CHECK(e.data.to_vector<uint8_t>() != a.get(43).data.to_vector<uint8_t>());

  std::vector<int> seen(7, 0);
  for (int64_t i = 0; i < a.size(); ++i) {
    int64_t y = label(a.get(i));
    REQUIRE(y >= 0);
    REQUIRE(y < 7);
    ++seen[static_cast<size_t>(y)];
  }
  for (int count : seen) CHECK(count > 0);  // 100 draws over 7 classes: every class appears

  SyntheticDataset floats(4, {2, 3}, 2, 0, kFloat32);
  std::vector<float> values = floats.get(1).data.to_vector<float>();
  REQUIRE(values.size() == 6);
  for (float v : values) {
    CHECK(v >= 0.0f);
    CHECK(v < 1.0f);
  }
  CHECK_THROWS_WITH(SyntheticDataset(4, {2, 0}, 2), Catch::Contains("positive dims"));
  CHECK_THROWS_WITH(SyntheticDataset(4, {2}, 0), Catch::Contains("num_classes must be >= 1"));
}
