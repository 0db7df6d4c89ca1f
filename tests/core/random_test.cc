// The Philox generator: reproducibility across thread counts, seeds, state round trips and
// split fills, and statistical sanity of rand/randn/randint/bernoulli on ~1e5 samples.
#include <cmath>
#include <random>
#include <set>

#include <catch2/catch.hpp>

#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"
#include "core/portable_math.h"

using namespace ember;

namespace {

constexpr int64_t kSamples = 100000;

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double variance_of(const std::vector<double>& v) {
  double m = mean_of(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

// Restores the thread count a test changed, also when it fails.
struct ThreadCountGuard {
  int saved = cpu::num_threads();
  ~ThreadCountGuard() { cpu::set_num_threads(saved); }
};

}  // namespace

TEST_CASE("the same seed gives the same values whatever the thread count") {
  ThreadCountGuard guard;
  std::vector<std::vector<double>> uniform, normal;
  std::vector<std::vector<int64_t>> ints;
  for (int threads : {1, 2, 3}) {
    cpu::set_num_threads(threads);
    manual_seed(2024);
    // Large enough that the fill is split across the pool.
    uniform.push_back(rand({50000}, kFloat64).to_vector<double>());
    normal.push_back(randn({301, 97}, kFloat32).to_vector<double>());
    ints.push_back(randint(-5, 17, {40000}).to_vector<int64_t>());
  }
  for (size_t i = 1; i < uniform.size(); ++i) {
    CHECK(uniform[i] == uniform[0]);
    CHECK(normal[i] == normal[0]);
    CHECK(ints[i] == ints[0]);
  }
}

TEST_CASE("manual_seed restarts the sequence and different seeds differ") {
  manual_seed(7);
  auto a = rand({16}).to_vector<float>();
  auto b = rand({16}).to_vector<float>();
  CHECK(a != b);  // consecutive calls continue the stream
  manual_seed(7);
  CHECK(rand({16}).to_vector<float>() == a);
  CHECK(rand({16}).to_vector<float>() == b);
  manual_seed(8);
  CHECK(rand({16}).to_vector<float>() != a);

  Generator g1(99), g2(99);
  CHECK(randn({8}, {}, &g1).to_vector<float>() == randn({8}, {}, &g2).to_vector<float>());
  CHECK(g1.seed() == 99);
}

TEST_CASE("Generator state round-trips exactly") {
  Generator g(123);
  rand({10}, {}, &g);
  std::array<uint64_t, 2> saved = g.state();
  CHECK(saved == std::array<uint64_t, 2>{123, 10});
  auto next = randn({5, 5}, kFloat64, &g).to_vector<double>();
  g.set_state(saved);
  CHECK(randn({5, 5}, kFloat64, &g).to_vector<double>() == next);
  Generator other;
  other.set_state(saved);
  CHECK(randn({5, 5}, kFloat64, &other).to_vector<double>() == next);
}

TEST_CASE("one fill of 1000 values equals two fills of 500") {
  for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
    Generator whole(5), halves(5);
    auto all = rand({1000}, dtype, &whole).to_vector<double>();
    auto first = rand({500}, dtype, &halves).to_vector<double>();
    auto second = rand({500}, dtype, &halves).to_vector<double>();
    first.insert(first.end(), second.begin(), second.end());
    CHECK(first == all);
  }
  // The in-place fills draw from the default generator in the same counter order,
  // also into a non-contiguous destination (filled in logical order).
  manual_seed(11);
  auto expected = randn({6, 4}).to_vector<float>();
  manual_seed(11);
  Tensor dst = zeros({4, 6}).t();
  dst.normal_();
  CHECK(dst.to_vector<float>() == expected);
}

TEST_CASE("rand is uniform on [0, 1)") {
  Generator g(1);
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    auto v = rand({kSamples}, dtype, &g).to_vector<double>();
    double lo = 1, hi = 0;
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    INFO(dtype_name(dtype));
    CHECK(lo >= 0.0);
    CHECK(hi < 1.0);
    // Standard error of the mean is sqrt(1/12 / n) ~ 0.0009: 0.005 is over five of them.
    CHECK(mean_of(v) == Approx(0.5).margin(0.005));
    CHECK(variance_of(v) == Approx(1.0 / 12).margin(0.003));
  }
  Tensor u = zeros({kSamples}, kFloat64);
  u.uniform_(-2, 3);
  auto w = u.to_vector<double>();
  CHECK(*std::min_element(w.begin(), w.end()) >= -2.0);
  CHECK(*std::max_element(w.begin(), w.end()) < 3.0);
  CHECK(mean_of(w) == Approx(0.5).margin(0.03));
}

TEST_CASE("randn has mean 0 and variance 1") {
  Generator g(2);
  auto v = randn({kSamples}, kFloat64, &g).to_vector<double>();
  CHECK(mean_of(v) == Approx(0.0).margin(0.015));  // 1/sqrt(n) ~ 0.003
  CHECK(variance_of(v) == Approx(1.0).margin(0.02));
  int64_t beyond_two_sigma = 0;
  for (double x : v) beyond_two_sigma += std::fabs(x) > 2.0;
  CHECK(static_cast<double>(beyond_two_sigma) / kSamples == Approx(0.0455).margin(0.004));
  Tensor n = empty({kSamples});
  n.normal_(3.0, 0.5);
  auto w = n.to_vector<double>();
  CHECK(mean_of(w) == Approx(3.0).margin(0.01));
  CHECK(std::sqrt(variance_of(w)) == Approx(0.5).margin(0.01));
}

TEST_CASE("randint covers [low, high) roughly uniformly") {
  Generator g(3);
  for (DType dtype : {kInt64, kInt32, kUInt8, kFloat32}) {
    auto v = randint(3, 13, {kSamples}, dtype, &g).to_vector<double>();
    std::vector<int64_t> counts(10, 0);
    for (double x : v) {
      REQUIRE(x >= 3);
      REQUIRE(x < 13);
      REQUIRE(x == std::floor(x));
      ++counts[static_cast<size_t>(x) - 3];
    }
    INFO(dtype_name(dtype));
    for (int64_t c : counts) CHECK(c == Approx(kSamples / 10).epsilon(0.05));  // sd ~ 95 of 10000
  }
  auto negative = randint(-3, -1, {1000}, kInt64, &g).to_vector<int64_t>();
  CHECK(std::set<int64_t>(negative.begin(), negative.end()) == std::set<int64_t>{-3, -2});
  CHECK_THROWS_WITH(randint(4, 4, {2}), Catch::Contains("randint") && Catch::Contains("low=4, high=4"));
}

TEST_CASE("bernoulli draws ones with probability p") {
  Generator g(4);
  auto v = bernoulli({kSamples}, 0.3, {}, &g).to_vector<double>();
  double ones = 0;
  for (double x : v) {
    REQUIRE((x == 0.0 || x == 1.0));
    ones += x;
  }
  CHECK(ones / kSamples == Approx(0.3).margin(0.006));  // sd ~ 0.0015
  CHECK(bernoulli({100}, 0.0, {}, &g).sum().item<double>() == 0);
  CHECK(bernoulli({100}, 1.0, kBool, &g).sum().item<double>() == 100);

  // Per-element probabilities: columns of p 0, 0.5 and 1.
  Tensor p = tensor({0.0f, 0.5f, 1.0f}).expand({20000, 3});
  Tensor draws = bernoulli(p, &g);
  CHECK(draws.dtype() == kFloat32);
  auto column_means = draws.mean({0}).to_vector<double>();
  CHECK(column_means[0] == 0.0);
  CHECK(column_means[1] == Approx(0.5).margin(0.015));
  CHECK(column_means[2] == 1.0);
  Tensor b = zeros({kSamples});
  b.bernoulli_(0.8);
  CHECK(b.mean().item<double>() == Approx(0.8).margin(0.006));
  CHECK_THROWS_WITH(bernoulli({2}, 1.5), Catch::Contains("bernoulli") && Catch::Contains("1.5"));
}

TEST_CASE("random factories reject integer dtypes where they make no sense") {
  CHECK_THROWS_WITH(rand({2}, kInt64), Catch::Contains("rand: expected a floating dtype, got int64"));
  CHECK_THROWS_WITH(randn({2}, kBool), Catch::Contains("randn: expected a floating dtype, got bool"));
  Tensor i = zeros({2}, kInt32);
  CHECK_THROWS_WITH(i.normal_(), Catch::Contains("normal_") && Catch::Contains("int32"));
}

// The log and cos(2 pi u) behind randn, built from exactly rounded operations so that every device
// draws the same bits (core/portable_math.h), stay within 2 ulp of a long double reference.
TEST_CASE("portable log and cos(2 pi u) are within 2 ulp of long double") {
  std::mt19937_64 rng(17);
  auto ulps = [](double got, long double want) {
    const double rounded = static_cast<double>(want);
    const double ulp = std::nextafter(std::fabs(rounded), INFINITY) - std::fabs(rounded);
    return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / ulp);
  };
  double worst_log = 0, worst_cos = 0;
  std::vector<double> inputs = {1.0,   0.5,     0.70710678118654746, 0.70710678118654757, 1.0 / 9007199254740992.0, 2.0,
                                1e300, 3.0e-300};
  for (int i = 0; i < 200000; ++i) inputs.push_back(1.0 - static_cast<double>(rng() >> 11) * 0x1p-53);
  for (double x : inputs) {
    INFO("log(" << x << ")");
    const double got = ember::portable::log(x);
    if (x == 1.0) {
      CHECK(got == 0.0);
      continue;
    }
    worst_log = std::max(worst_log, ulps(got, std::log(static_cast<long double>(x))));
  }
  const long double two_pi = 6.283185307179586476925286766559005768L;
  std::vector<double> turns = {0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 0x1p-53, 1.0 - 0x1p-53};
  for (int i = 0; i < 200000; ++i) turns.push_back(static_cast<double>(rng() >> 11) * 0x1p-53);
  for (double u : turns) {
    const long double want = std::cos(two_pi * static_cast<long double>(u));
    const double got = ember::portable::cos_two_pi(u);
    // Near a zero of cos the result is tiny and an ulp of it meaningless: compare with the ulp of 1.
    const double error =
        std::fabs(want) < 0.5L ? static_cast<double>(std::fabs(got - want) / 0x1p-53L) : ulps(got, want);
    INFO("cos(2 pi " << u << ")");
    CHECK(error <= 2.0);
    worst_cos = std::max(worst_cos, error);
  }
  INFO("worst log error " << worst_log << " ulp, worst cos error " << worst_cos << " ulp");
  CHECK(worst_log <= 2.0);
  CHECK(worst_cos <= 2.0);
}
