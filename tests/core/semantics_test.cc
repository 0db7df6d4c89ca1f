// Op semantics the random table does not reach: NaN and infinity handling, rounding ties,
// degenerate bounds and sizes, accumulation accuracy, and mixed-dtype joins and comparisons.
#include <cmath>

#include <catch2/catch.hpp>

#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"

using namespace ember;

namespace {

Tensor floats(std::vector<float> v) { return tensor(v); }

}  // namespace

TEST_CASE("NaN propagates through max, min, clamp and relu") {
  Tensor x = floats({1.f, NAN, 3.f, NAN});
  CHECK(std::isnan(x.amax().item<float>()));
  CHECK(std::isnan(x.amin().item<float>()));
  CHECK(std::isnan(x.max().item<float>()));
  auto [value, index] = x.max(0);
  CHECK(std::isnan(value.item<float>()));
  CHECK(index.item<int64_t>() == 1);  // the first NaN
  CHECK(x.argmin().item<int64_t>() == 1);
  auto maxed = x.maximum(floats({5.f, 0.f, NAN, NAN})).to_vector<float>();
  CHECK(maxed[0] == 5.f);
  CHECK(std::isnan(maxed[1]));
  CHECK(std::isnan(maxed[2]));
  CHECK(std::isnan(x.minimum(zeros({4})).to_vector<float>()[1]));
  CHECK(std::isnan(x.clamp(0, 2).to_vector<float>()[1]));
  CHECK(std::isnan(x.relu().to_vector<float>()[3]));
  CHECK(std::isnan(x.sign().to_vector<float>()[1]));
  CHECK(std::isnan(x.norm(INFINITY).item<float>()));
}

TEST_CASE("round is half to even, floor and ceil go the right way for negatives") {
  Tensor x = floats({0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.4999f});
  CHECK(x.round().to_vector<float>() == std::vector<float>{0, 2, 2, -0.f, -2, 2});
  CHECK(floats({-1.5f, 1.5f}).floor().to_vector<float>() == std::vector<float>{-2, 1});
  CHECK(floats({-1.5f, 1.5f}).ceil().to_vector<float>() == std::vector<float>{-1, 2});
}

TEST_CASE("clamp with min above max gives max, for floats and integers") {
  CHECK(floats({-5.f, 0.f, 5.f}).clamp(2, 1).to_vector<float>() == std::vector<float>{1, 1, 1});
  CHECK(tensor<int64_t>({-5, 0, 5}).clamp(2, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1});
  Tensor i = tensor<int32_t>({-5, 0, 5});
  i.clamp_(3, -3);
  CHECK(i.to_vector<int32_t>() == std::vector<int32_t>{-3, -3, -3});
}

TEST_CASE("integer division is true division and integer powers stay exact") {
  Tensor a = tensor<int64_t>({7, -7, 0});
  Tensor q = a / tensor<int64_t>({2, 2, 5});
  CHECK(q.dtype() == kFloat32);
  CHECK(q.to_vector<float>() == std::vector<float>{3.5f, -3.5f, 0.f});
  CHECK((a / 2).to_vector<float>() == std::vector<float>{3.5f, -3.5f, 0.f});
  Tensor big = tensor<int64_t>({3});
  CHECK(big.pow(39).item<int64_t>() == 4052555153018976267);  // beyond double's exact range
  CHECK(big.pow(tensor<int64_t>({39})).item<int64_t>() == 4052555153018976267);
  CHECK(tensor<int64_t>({2, -2}).pow(0).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
}

TEST_CASE("sums accumulate in double and reductions of bool count") {
  Tensor tenths = full({1000000}, 0.1f);
  CHECK(tenths.sum().item<double>() == Approx(100000.0).epsilon(1e-6));
  CHECK(tenths.mean().item<float>() == Approx(0.1f).epsilon(1e-6));
  Tensor flags = tensor(std::vector<bool>{true, false, true, true});
  CHECK(flags.sum().dtype() == kInt64);
  CHECK(flags.sum().item<int64_t>() == 3);
  CHECK(flags.amax().dtype() == kBool);
  CHECK(tensor<uint8_t>({200, 200}).sum().item<int64_t>() == 400);  // no uint8 overflow
  Tensor h = full({4096}, 1.0f).to(kFloat16);                       // a float16 running sum would stop at 2048
  CHECK(h.sum().item<float>() == 4096.0f);
}

TEST_CASE("variance edge cases: one element, the correction, constant inputs") {
  Tensor one = floats({4.f});
  CHECK(std::isnan(one.var().item<float>()));
  CHECK(one.var({}, false).item<float>() == 0.0f);
  Tensor x = floats({1.f, 2.f, 3.f, 4.f});
  CHECK(x.var().item<float>() == Approx(1.6666667f));
  CHECK(x.var({}, false).item<float>() == Approx(1.25f));
  CHECK(x.std().item<float>() == Approx(std::sqrt(1.6666667f)));
  CHECK(full({50}, 1e4f).var().item<float>() == 0.0f);
}

TEST_CASE("logsumexp handles infinities without NaN") {
  Tensor x = floats({-INFINITY, -INFINITY, 0.f, 1.f}).view({2, 2});
  auto rows = x.logsumexp({1}).to_vector<float>();
  CHECK(rows[0] == -INFINITY);
  CHECK(rows[1] == Approx(std::log(1.0 + std::exp(1.0))));
  CHECK(floats({INFINITY, 1.f}).logsumexp({0}).item<float>() == INFINITY);
  CHECK(floats({1000.f, 1000.f}).logsumexp({0}).item<float>() == Approx(1000.0 + std::log(2.0)));  // no overflow
  // Nothing to sum: log(0), like torch.logsumexp.
  Tensor empty_rows = zeros({2, 0}).logsumexp({1});
  CHECK(empty_rows.to_vector<float>() == std::vector<float>{-INFINITY, -INFINITY});
  CHECK(zeros({0, 3}).logsumexp({0, 1}, true).sizes() == Shape{1, 1});
}

TEST_CASE("cat promotes dtypes and skips legacy empty 1-D inputs") {
  Tensor c = cat({tensor<int32_t>({1, 2}), tensor({0.5f}).to(kFloat16)});
  CHECK(c.dtype() == kFloat16);
  CHECK(c.to_vector<float>() == std::vector<float>{1, 2, 0.5f});
  Tensor m = cat({zeros({0}), ones({2, 3})}, 1);
  CHECK(m.sizes() == Shape{2, 3});
  CHECK(cat({zeros({0}), zeros({0})}).sizes() == Shape{0});
  CHECK(stack({full({}, 1), full({}, 2)}).to_vector<int64_t>() == std::vector<int64_t>{1, 2});
}

TEST_CASE("comparisons promote mixed operands before comparing") {
  Tensor i = tensor<int64_t>({1, 2});
  CHECK(i.lt(full({}, 1.5)).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK((tensor<uint8_t>({255}) == tensor<int32_t>({255})).item<bool>());
  CHECK((floats({0.1f}) == tensor({0.1})).item<bool>() == false);  // float32 0.1 is not float64 0.1
  CHECK((tensor(std::vector<bool>{true}) > tensor<int64_t>({0})).item<bool>());
}

TEST_CASE("where broadcasts condition and promotes its branches") {
  Tensor cond = tensor(std::vector<bool>{true, false}).view({2, 1});
  Tensor out = where(cond, tensor<int32_t>({1, 2, 3}), full({}, 0.5, kFloat64));
  CHECK(out.dtype() == kFloat64);
  CHECK(out.sizes() == Shape{2, 3});
  CHECK(out.to_vector<double>() == std::vector<double>{1, 2, 3, 0.5, 0.5, 0.5});
}

TEST_CASE("arg reductions on 0-dim tensors and keepdim shapes") {
  Tensor s = full({}, 3.0);
  CHECK(s.argmax().item<int64_t>() == 0);
  CHECK(s.argmax(0).item<int64_t>() == 0);
  auto [v, i] = s.max(-1, true);
  CHECK(v.dim() == 0);
  CHECK(i.item<int64_t>() == 0);
  Tensor m = tensor({1.f, 5.f, 5.f, 0.f, 2.f, 7.f}, {2, 3});
  CHECK(m.argmax(std::nullopt, true).sizes() == Shape{1, 1});
  CHECK(m.argmax().item<int64_t>() == 5);
  CHECK(m.argmax(1).to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK(m.t().argmax(0, true).sizes() == Shape{1, 2});
}

// The CPU reduction kernel has three strategies: one reduction split across threads (few
// outputs, >= 65536 elements each), whole-row accumulation (outer dims into a contiguous kept
// dim, in tiles of 256) and one output per task. Each must match a plain double loop.
TEST_CASE("reductions agree with a double loop on every kernel strategy and thread count") {
  const int threads_before = cpu::num_threads();
  Generator g(17);
  Tensor long_row = randn({2, 70001}, kFloat64, &g);
  Tensor wide = randn({40, 600}, kFloat64, &g);
  auto host = long_row.to_vector<double>();
  auto host_wide = wide.to_vector<double>();
  for (int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    cpu::set_num_threads(threads);
    auto sums = long_row.sum({1}).to_vector<double>();
    auto maxes = long_row.amax({1}).to_vector<double>();
    auto norms = long_row.norm(3, {1}).to_vector<double>();
    for (int r = 0; r < 2; ++r) {
      double sum = 0, max = -INFINITY, cubes = 0;
      for (int i = 0; i < 70001; ++i) {
        double v = host[static_cast<size_t>(r * 70001 + i)];
        sum += v;
        max = std::max(max, v);
        cubes += std::fabs(v) * v * v;
      }
      CHECK(sums[r] == Approx(sum).margin(1e-9));
      CHECK(maxes[r] == max);
      CHECK(norms[r] == Approx(std::cbrt(cubes)).epsilon(1e-12));
    }
    auto column_means = wide.mean({0}).to_vector<double>();  // 600 columns: three tiles
    auto transposed_sums = wide.t().sum({1}).to_vector<double>();
    for (int j = 0; j < 600; ++j) {
      double sum = 0;
      for (int i = 0; i < 40; ++i) sum += host_wide[static_cast<size_t>(i * 600 + j)];
      CHECK(column_means[j] == Approx(sum / 40).margin(1e-12));
      CHECK(transposed_sums[j] == Approx(sum).margin(1e-12));
    }
  }
  cpu::set_num_threads(threads_before);
}
