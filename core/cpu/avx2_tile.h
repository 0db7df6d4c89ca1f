// The AVX2 register tile that Ember's own channels-last convolution kernels for CPUs without
// AVX-512 share (direct_conv_weight_grad.h, strided_conv_forward.h, strided_conv_backward_data.h):
// 12 vector registers of sums, as up to 6 rows x 16 lanes or 3 rows x 32 lanes (or 6 x 8). Each
// step of a reduction loads one to four vectors of 8 lanes from one side and broadcasts one value
// per tile row from the other, for up to 12 multiply-adds.
#pragma once

#include <cstdint>
#include <vector>

namespace ember::cpu::avx2 {

// Whether this CPU runs the tile at all (AVX2 and FMA).
bool supported();

// Whether the kernels built on it should be taken: AVX2 without AVX-512 (CPUs with AVX-512 have
// oneDNN's AVX-512 kernels and Ember's direct_conv.h, which these were not measured against).
bool preferred_cpu();

// The steps of one reduction: `rows` x `cols` of them, walked row by row. `b` (broadcast side)
// and `v` (vector side) advance by `*_col` floats per step and by `*_row` floats per row;
// consecutive tile rows broadcast values `b_lane` floats apart.
struct Walk {
  int64_t rows, cols;
  int64_t b_row, v_row;
  int64_t b_col, v_col;
  int64_t b_lane;
};

// out[i * ld_out + l] (+)= sum over the walk's steps s of b[i * b_lane + s] * v[s + l], for tile
// rows i < the tile's rows and lanes l < its lanes; sums start from `out` when `accumulate`, else
// from zero.
using Tile = void (*)(const Walk& walk, const float* b, const float* v, float* out, int64_t ld_out, bool accumulate);

// The tile of `rows` (1 to 6, or to 3 at 32 lanes) x `lanes` (8, 16 or 32).
Tile tile(int rows, int lanes);

// The same tile writing its sums with streaming stores, around the cache, for outputs too large to
// stay there for their reader. `out` and `ld_out` must keep every vector 32-byte aligned. A thread
// calls stream_fence() (streaming_stores.h) after its last streaming tile.
Tile streaming_tile(int rows, int lanes);

// The lanes of the next tile over `remaining` vector-side values (a multiple of 8): 32 while that
// many are left, since 3 x 32 tiles broadcast once for 32 lanes where two 6 x 16 tiles broadcast
// twice (3-12% faster in all three kernels), then 16 or 8.
int lanes_for(int64_t remaining);

// Where tiles start when `count` rows are split as evenly as possible into tiles of at most 6
// rows (3 at 32 lanes): a last tile of 1-2 rows would leave too few independent sums to keep the
// multiply-add units busy. Each list ends with `count`.
class TileSplit {
 public:
  explicit TileSplit(int64_t count);
  const std::vector<int64_t>& starts(int lanes) const { return lanes >= 32 ? wide_ : narrow_; }

 private:
  std::vector<int64_t> narrow_, wide_;
};

}  // namespace ember::cpu::avx2
