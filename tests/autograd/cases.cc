// The one table of gradient-check cases, assembled from the per-family files.
#include "tests/autograd/cases.h"

namespace ember::testing {

Shape ShapeDraw::next(int min_rank, int max_rank, int64_t max_numel) {
  static constexpr int64_t kSizes[] = {1, 2, 3, 5};
  std::uniform_int_distribution<int> rank_dist(min_rank, max_rank), size_dist(0, 3);
  while (true) {
    Shape shape(static_cast<size_t>(rank_dist(rng_)));
    for (int64_t& s : shape) s = kSizes[size_dist(rng_)];
    bool has_extent = shape.empty();
    for (int64_t s : shape) has_extent = has_extent || s > 1;
    if (has_extent && shape_numel(shape) <= max_numel) return shape;
  }
}

const std::vector<GradCase>& grad_cases() {
  static const std::vector<GradCase> cases = [] {
    std::vector<GradCase> all;
    add_elementwise_cases(all);
    add_inplace_cases(all);
    add_reduction_cases(all);
    add_view_cases(all);
    add_linalg_cases(all);
    add_nn_cases(all);
    add_loss_cases(all);
    return all;
  }();
  return cases;
}

}  // namespace ember::testing
