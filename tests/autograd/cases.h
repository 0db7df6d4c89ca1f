// Internal to the case tables: each cases_*.cc appends one family of GradCases, and ShapeDraw
// gives them reproducible random shapes.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "tests/autograd/gradcheck.h"

namespace ember::testing {

void add_elementwise_cases(std::vector<GradCase>& cases);  // unary, binary, where
void add_inplace_cases(std::vector<GradCase>& cases);      // in-place ops rebasing history
void add_reduction_cases(std::vector<GradCase>& cases);
void add_view_cases(std::vector<GradCase>& cases);    // views, split family, cat/stack
void add_linalg_cases(std::vector<GradCase>& cases);  // matmul forms, copies and casts
void add_nn_cases(std::vector<GradCase>& cases);      // layers of autograd/functional.h
void add_loss_cases(std::vector<GradCase>& cases);    // losses, embedding, gather/scatter_add

// Random shapes from a fixed seed, so a failure names a shape that reproduces. Sizes come from
// {1, 2, 3, 5}: size-1 dims (broadcasting, squeezing) and odd sizes (no power-of-two luck).
class ShapeDraw {
 public:
  explicit ShapeDraw(uint32_t seed) : rng_(seed) {}
  // Rank in [min_rank, max_rank], at most max_numel elements, at least one dim > 1 when rank > 0.
  Shape next(int min_rank, int max_rank, int64_t max_numel = 48);

 private:
  std::mt19937 rng_;
};

}  // namespace ember::testing
