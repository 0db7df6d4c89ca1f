// tools/train/slow_ranks.h: a rank is named once it works more than 1.2x the median for 10 steps in
// a row, once per streak; a step under the bound restarts its count.
#include <catch2/catch.hpp>

#include "core/error.h"
#include "tools/train/slow_ranks.h"

using ember::train::SlowRankDetector;

TEST_CASE("slow ranks: named after 10 steps in a row over 1.2x the median, once per streak", "[train]") {
  SlowRankDetector detector(4);
  for (int step = 1; step <= 9; ++step) CHECK(detector.observe({1.0, 1.0, 1.3, 1.0}).empty());
  CHECK(detector.observe({1.0, 1.0, 1.3, 1.0}) == std::vector<int>{2});
  CHECK(detector.median() == 1.0);
  CHECK(detector.observe({1.0, 1.0, 1.3, 1.0}).empty());  // still slow: not named again
  CHECK(detector.observe({1.0, 1.0, 1.1, 1.0}).empty());  // back under: the streak ends
  for (int step = 1; step <= 9; ++step) CHECK(detector.observe({1.0, 1.0, 1.3, 1.0}).empty());
  CHECK(detector.observe({1.0, 1.0, 1.3, 1.0}) == std::vector<int>{2});
}

TEST_CASE("slow ranks: 1.2x exactly is not slow; an even count's median is the middle pair's mean", "[train]") {
  SlowRankDetector two(2);
  // median of {1, 2} is 1.5: 2 > 1.8, so rank 1 is slow; {1, 1.4}: median 1.2, 1.4 <= 1.44.
  for (int step = 1; step < 10; ++step) CHECK(two.observe({1.0, 2.0}).empty());
  CHECK(two.observe({1.0, 2.0}) == std::vector<int>{1});
  SlowRankDetector steady(2);
  for (int step = 0; step < 20; ++step) CHECK(steady.observe({1.0, 1.4}).empty());
  SlowRankDetector exact(3);
  for (int step = 0; step < 20; ++step) CHECK(exact.observe({1.0, 1.0, 1.2}).empty());
  SlowRankDetector one(1);
  for (int step = 0; step < 20; ++step) CHECK(one.observe({5.0}).empty());
}

TEST_CASE("slow ranks: bad sizes raise", "[train]") {
  SlowRankDetector detector(3);
  CHECK_THROWS_WITH(detector.observe({1.0, 2.0}), Catch::Contains("expected 3") && Catch::Contains("got 2"));
  CHECK_THROWS_AS(SlowRankDetector(0), ember::Error);
}
