// How a Sequential splits into pipeline stages: contiguous runs of layers whose largest cost is
// as small as it can be, the cost being a layer's parameter count or its measured time.
#include <algorithm>
#include <limits>

#include "parallel/pipeline.h"
#include "parallel/pipeline_auto.h"

namespace ember::parallel {

std::vector<int64_t> balance_costs(const std::vector<double>& costs, int64_t parts) {
  const int64_t n = static_cast<int64_t>(costs.size());
  EMBER_CHECK(parts >= 1 && parts <= n, "Pipeline balance: cannot split ", n, " layers into ", parts,
              " non-empty stages");
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0.0);
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  // best[k][j]: the smallest largest-stage cost splitting the first j layers into k stages.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> cut(parts + 1, std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0.0;
  for (int64_t k = 1; k <= parts; ++k) {
    for (int64_t j = k; j <= n; ++j) {
      for (int64_t i = k - 1; i < j; ++i) {
        const double cost = std::max(best[k - 1][i], prefix[j] - prefix[i]);
        // Ties go to the later cut, so that earlier stages take fewer layers (the last stage
        // holds the loss too).
        if (cost <= best[k][j]) {
          best[k][j] = cost;
          cut[k][j] = i;
        }
      }
    }
  }
  std::vector<int64_t> balance(static_cast<size_t>(parts));
  for (int64_t k = parts, j = n; k >= 1; --k) {
    balance[k - 1] = j - cut[k][j];
    j = cut[k][j];
  }
  return balance;
}

std::vector<int64_t> balance_by_parameters(const nn::Sequential& sequential, int64_t parts) {
  std::vector<double> costs;
  for (size_t i = 0; i < sequential->size(); ++i) {
    int64_t count = 0;
    for (const Tensor& p : (*sequential)[i]->parameters()) count += p.numel();
    costs.push_back(static_cast<double>(std::max<int64_t>(count, 1)));
  }
  return balance_costs(costs, parts);
}

std::vector<int64_t> balance_by_time(const nn::Sequential& sequential, const Tensor& sample, int64_t parts,
                                     int repeats) {
  EMBER_CHECK(sample.defined(), "balance_by_time: the sample input is undefined");
  EMBER_CHECK(repeats >= 1, "balance_by_time: repeats must be at least 1, got ", repeats);
  std::vector<double> costs;
  for (const LayerCost& c : measure_layer_costs(sequential, sample, repeats))
    costs.push_back(c.forward_s + c.backward_s);
  return balance_costs(costs, parts);
}

}  // namespace ember::parallel
