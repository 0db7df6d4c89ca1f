// parallel/bucket_autotune.h on hand-made timelines: the partition along the gradient order, the
// all-reduce cost between and beyond its measurements, the simulated exposed communication against
// hand-computed values, and the choice (a smaller cap when late gradients leave a big bucket
// exposed, the default when nothing is clearly better).
#include <catch2/catch.hpp>

#include "parallel/bucket_autotune.h"

using namespace ember::parallel;

namespace {

constexpr int64_t kMB = 1024 * 1024;

}  // namespace

TEST_CASE("bucket autotune: partition closes at the caps and where the kind changes", "[ddp][autotune]") {
  const std::vector<int64_t> bytes = {kMB, 3 * kMB, 3 * kMB, kMB, kMB, 4 * kMB};
  const std::vector<size_t> order = {5, 4, 3, 2, 1, 0};
  const std::vector<int> same(6, 0);
  // first 1 MB: {5} (4 MB >= 1); then cap 5: {4, 3, 2} (5 MB), {1, 0} (4 MB).
  CHECK(partition_buckets(order, bytes, same, 1, 5) == std::vector<std::vector<size_t>>{{5}, {4, 3, 2}, {1, 0}});
  CHECK(partition_buckets(order, bytes, same, 100, 100) == std::vector<std::vector<size_t>>{{5, 4, 3, 2, 1, 0}});
  const std::vector<int> kinds = {0, 0, 1, 1, 0, 0};  // e.g. a float64 pair in the middle
  CHECK(partition_buckets(order, bytes, kinds, 100, 100) == std::vector<std::vector<size_t>>{{5, 4}, {3, 2}, {1, 0}});
}

TEST_CASE("bucket autotune: all-reduce cost is linear between and beyond its points", "[ddp][autotune]") {
  AllReduceCost cost{{{1.0 * kMB, 0.002}, {5.0 * kMB, 0.006}, {25.0 * kMB, 0.026}}};
  CHECK(cost.seconds(3.0 * kMB) == Approx(0.004));
  CHECK(cost.seconds(25.0 * kMB) == Approx(0.026));
  CHECK(cost.seconds(45.0 * kMB) == Approx(0.046));  // beyond: the last segment's slope
  CHECK(cost.seconds(0.5 * kMB) == Approx(0.0015));  // below: the first segment's
  CHECK(cost.seconds(0.0) == Approx(0.001));
  CHECK(AllReduceCost{{{kMB, 0.003}}}.seconds(9 * kMB) == Approx(0.003));
}

TEST_CASE("bucket autotune: simulated exposed communication by hand", "[ddp][autotune]") {
  // Four 10 MB gradients ready at 1, 2, 3, 4 ms; backward ends at 5 ms; an all-reduce costs
  // 0.1 ms per MB (1 ms per gradient) plus nothing fixed.
  const std::vector<int64_t> bytes(4, 10 * kMB);
  GradientTimeline timeline{{0.001, 0.002, 0.003, 0.004}, 0.005};
  const AllReduceCost cost{{{0.0, 0.0}, {10.0 * kMB, 0.001}}};
  // One bucket per gradient: runs 1-2, 2-3, 3-4, 4-5 ms: nothing exposed.
  CHECK(simulate_exposed({{0}, {1}, {2}, {3}}, bytes, timeline, cost) == Approx(0.0).margin(1e-12));
  // One bucket of all: ready at 4 ms, 4 ms long: ends at 8 ms, 3 ms after backward.
  CHECK(simulate_exposed({{0, 1, 2, 3}}, bytes, timeline, cost) == Approx(0.003));
  // Two of two: 2-4 ms, then 4-6 ms: 1 ms exposed.
  CHECK(simulate_exposed({{0, 1}, {2, 3}}, bytes, timeline, cost) == Approx(0.001));
}

TEST_CASE("bucket autotune: a smaller cap wins when the default leaves a big bucket late", "[ddp][autotune]") {
  // 20 gradients of 2.5 MB ready every millisecond from 1 to 20 ms, backward ending at 21 ms; an
  // all-reduce costs 0.3 ms + 0.2 ms per MB. 25 MB buckets: the second (ready at 20 ms) takes
  // 5.3 ms: ends at 25.3 ms, 4.3 ms exposed. 5 MB buckets (1.3 ms each, one ready every 2 ms)
  // (first bucket 5 MB too) keep up but the last ends at 21.3 ms, 0.3 ms exposed; 1 MB caps put each gradient alone
  // (0.8 ms each, one ready every 1 ms): the last ends at 20.8 ms, nothing exposed.
  const size_t n = 20;
  std::vector<int64_t> bytes(n, 5 * kMB / 2);
  std::vector<size_t> order(n);
  GradientTimeline timeline;
  for (size_t i = 0; i < n; ++i) order[i] = i, timeline.ready_s.push_back(0.001 * static_cast<double>(i + 1));
  timeline.backward_end_s = 0.021;
  const AllReduceCost cost{{{0.0, 0.0003}, {100.0 * kMB, 0.0203}}};
  const std::vector<int> kind(n, 0);
  const BucketChoice choice = choose_buckets(order, bytes, kind, timeline, cost, 25, 25);
  CHECK(choice.candidates.front().cap_mb == 25);
  CHECK(choice.candidates.front().exposed_s == Approx(0.0043));
  CHECK(choice.cap_mb == 1);
  double chosen = -1;
  for (const BucketCandidate& c : choice.candidates)
    if (c.first_mb == choice.first_mb && c.cap_mb == choice.cap_mb) chosen = c.exposed_s;
  CHECK(chosen == Approx(0.0).margin(1e-12));
  for (const BucketCandidate& c : choice.candidates)
    if (c.first_mb == 5 && c.cap_mb == 5) CHECK(c.exposed_s == Approx(0.0003));
  CHECK(choice.backward_s == Approx(0.020));
  CHECK(choice.report().find("chose first") != std::string::npos);
}

TEST_CASE("bucket autotune: the default stays unless another is clearly better", "[ddp][autotune]") {
  // Everything ready at once at the end: every layout exposes its whole communication, and one
  // big bucket pays the fixed cost least; the default (25 MB, ~2 buckets) is within 5% of it.
  const size_t n = 10;
  std::vector<int64_t> bytes(n, 4 * kMB);
  std::vector<size_t> order(n);
  GradientTimeline timeline;
  for (size_t i = 0; i < n; ++i) order[i] = i, timeline.ready_s.push_back(0.010);
  timeline.backward_end_s = 0.010;
  const AllReduceCost cost{{{0.0, 0.00001}, {100.0 * kMB, 0.05001}}};
  const BucketChoice choice = choose_buckets(order, bytes, std::vector<int>(n, 0), timeline, cost, 1, 25);
  CHECK(choice.first_mb == 1);
  CHECK(choice.cap_mb == 25);
}
