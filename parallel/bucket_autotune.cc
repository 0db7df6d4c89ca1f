#include "parallel/bucket_autotune.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace ember::parallel {

std::vector<std::vector<size_t>> partition_buckets(const std::vector<size_t>& order, const std::vector<int64_t>& bytes,
                                                   const std::vector<int>& kind, double first_mb, double cap_mb) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> current;
  double cap = first_mb, held = 0;
  auto close = [&] {
    if (current.empty()) return;
    buckets.push_back(std::move(current));
    current.clear();
    held = 0;
    cap = cap_mb;
  };
  for (size_t index : order) {
    if (!current.empty() && kind[current.front()] != kind[index]) close();
    current.push_back(index);
    held += static_cast<double>(bytes[index]);
    if (held >= cap * 1024.0 * 1024.0) close();
  }
  close();
  return buckets;
}

double AllReduceCost::seconds(double bytes) const {
  EMBER_CHECK(!points.empty(), "AllReduceCost: no measurements");
  if (points.size() == 1) return points.front().second;
  size_t hi = 1;
  while (hi + 1 < points.size() && points[hi].first < bytes) ++hi;
  const auto [x0, y0] = points[hi - 1];
  const auto [x1, y1] = points[hi];
  const double t = x1 > x0 ? (bytes - x0) / (x1 - x0) : 0.0;
  return std::max(0.0, y0 + t * (y1 - y0));
}

double simulate_exposed(const std::vector<std::vector<size_t>>& buckets, const std::vector<int64_t>& bytes,
                        const GradientTimeline& timeline, const AllReduceCost& cost) {
  double queue_free = -1e300;
  for (const std::vector<size_t>& bucket : buckets) {
    double ready = -1e300, size = 0;
    for (size_t i : bucket) {
      ready = std::max(ready, timeline.ready_s[i]);
      size += static_cast<double>(bytes[i]);
    }
    queue_free = std::max(queue_free, ready) + cost.seconds(size);
  }
  return std::max(0.0, queue_free - timeline.backward_end_s);
}

BucketChoice choose_buckets(const std::vector<size_t>& order, const std::vector<int64_t>& bytes,
                            const std::vector<int>& kind, const GradientTimeline& timeline, const AllReduceCost& cost,
                            double default_first_mb, double default_cap_mb) {
  BucketChoice choice;
  choice.cost = cost;
  double first_ready = timeline.backward_end_s;
  for (double r : timeline.ready_s) first_ready = std::min(first_ready, r);
  choice.backward_s = timeline.backward_end_s - first_ready;
  auto evaluate = [&](double first_mb, double cap_mb) {
    const auto buckets = partition_buckets(order, bytes, kind, first_mb, cap_mb);
    choice.candidates.push_back({first_mb, cap_mb, buckets.size(), simulate_exposed(buckets, bytes, timeline, cost)});
  };
  evaluate(default_first_mb, default_cap_mb);
  for (double cap : {1.0, 5.0, 10.0, 25.0, 50.0, 100.0}) {
    if (cap != default_cap_mb) evaluate(default_first_mb, cap);
    if (cap != default_first_mb) evaluate(cap, cap);
  }
  const BucketCandidate& standard = choice.candidates.front();
  const BucketCandidate* best = &standard;
  for (const BucketCandidate& c : choice.candidates)
    if (c.exposed_s < best->exposed_s) best = &c;
  if (!(best->exposed_s < 0.95 * standard.exposed_s && standard.exposed_s - best->exposed_s > 2e-4)) best = &standard;
  choice.first_mb = best->first_mb;
  choice.cap_mb = best->cap_mb;
  return choice;
}

std::string BucketChoice::report() const {
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "backward %.2f ms; all-reduce", backward_s * 1e3);
  out += line;
  for (const auto& [size, seconds] : cost.points) {
    std::snprintf(line, sizeof line, " %.3g MB %.3g ms,", size / (1024.0 * 1024.0), seconds * 1e3);
    out += line;
  }
  out.back() = ';';
  auto table = [&](const char* title, const std::vector<BucketCandidate>& list, double BucketCandidate::*seconds) {
    if (list.empty()) return;
    out += title;
    for (const BucketCandidate& c : list) {
      std::snprintf(line, sizeof line, " (%g, %g) %zu buckets %.2f ms,", c.first_mb, c.cap_mb, c.buckets,
                    c.*seconds * 1e3);
      out += line;
    }
    out.back() = ';';
  };
  table(" exposed communication by (first, cap) MB:", candidates, &BucketCandidate::exposed_s);
  table(" measured (first gradient to averaged gradients) by (first, cap) MB:", measured, &BucketCandidate::measured_s);
  std::snprintf(line, sizeof line, " chose first %g MB, cap %g MB", first_mb, cap_mb);
  return out + line;
}

}  // namespace ember::parallel
