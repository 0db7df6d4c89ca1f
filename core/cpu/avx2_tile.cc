// The tile of avx2_tile.h.
#include "core/cpu/avx2_tile.h"

#include <immintrin.h>

#include "core/cpu/isa.h"

namespace ember::cpu::avx2 {

namespace {

template <int MR, int NV, bool Stream>
__attribute__((target("avx2,fma"))) void run_tile(const Walk& walk, const float* b, const float* v, float* out,
                                                  int64_t ld_out, bool accumulate) {
  __m256 sum[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      sum[i][j] = accumulate ? _mm256_loadu_ps(out + i * ld_out + 8 * j) : _mm256_setzero_ps();
  // One loop over all steps (a nested row loop made GCC keep the sums in memory).
  const int64_t cols = walk.cols, b_col = walk.b_col, v_col = walk.v_col, b_lane = walk.b_lane;
  const int64_t b_skip = walk.b_row - cols * b_col, v_skip = walk.v_row - cols * v_col;
  const int64_t steps = walk.rows * cols;
  int64_t col = 0;
  for (int64_t s = 0; s < steps; ++s) {
    if constexpr (NV <= 2) {
      // Up to 12 sums + NV vectors + 1 broadcast: the vectors are loaded once per step.
      __m256 vv[NV];
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) vv[j] = _mm256_loadu_ps(v + 8 * j);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m256 bb = _mm256_broadcast_ss(b + i * b_lane);
#pragma GCC unroll 2
        for (int j = 0; j < NV; ++j) sum[i][j] = _mm256_fmadd_ps(bb, vv[j], sum[i][j]);
      }
    } else {
      // 12 sums + MR broadcasts + 1 vector: the broadcasts are loaded first, then one vector at
      // a time (all four vectors at once would need 19 registers and spill).
      __m256 bb[MR];
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) bb[i] = _mm256_broadcast_ss(b + i * b_lane);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        const __m256 vj = _mm256_loadu_ps(v + 8 * j);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) sum[i][j] = _mm256_fmadd_ps(bb[i], vj, sum[i][j]);
      }
    }
    b += b_col, v += v_col;
    if (++col == cols) col = 0, b += b_skip, v += v_skip;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      if constexpr (Stream)
        _mm256_stream_ps(out + i * ld_out + 8 * j, sum[i][j]);
      else
        _mm256_storeu_ps(out + i * ld_out + 8 * j, sum[i][j]);
    }
}

template <int NV, bool Stream>
Tile with_rows(int rows) {
  switch (rows) {
    case 1:
      return run_tile<1, NV, Stream>;
    case 2:
      return run_tile<2, NV, Stream>;
    case 3:
      return run_tile<3, NV, Stream>;
    case 4:
      return run_tile<4, NV, Stream>;
    case 5:
      return run_tile<5, NV, Stream>;
    default:
      return run_tile<6, NV, Stream>;
  }
}

template <bool Stream>
Tile tile_of(int rows, int lanes) {
  if (lanes >= 32) {
    switch (rows) {
      case 1:
        return run_tile<1, 4, Stream>;
      case 2:
        return run_tile<2, 4, Stream>;
      default:
        return run_tile<3, 4, Stream>;
    }
  }
  return lanes >= 16 ? with_rows<2, Stream>(rows) : with_rows<1, Stream>(rows);
}

}  // namespace

bool supported() { return has_avx2_fma(); }

bool preferred_cpu() { return supported() && !has_avx512f(); }

Tile tile(int rows, int lanes) { return tile_of<false>(rows, lanes); }

Tile streaming_tile(int rows, int lanes) { return tile_of<true>(rows, lanes); }

int lanes_for(int64_t remaining) { return remaining >= 32 ? 32 : remaining >= 16 ? 16 : 8; }

namespace {

std::vector<int64_t> tile_starts(int64_t count, int64_t rows) {
  if (count <= 0) return {0};
  const int64_t tiles = (count + rows - 1) / rows;
  std::vector<int64_t> starts;
  for (int64_t t = 0; t <= tiles; ++t) starts.push_back(t * count / tiles);
  return starts;
}

}  // namespace

TileSplit::TileSplit(int64_t count) : narrow_(tile_starts(count, 6)), wide_(tile_starts(count, 3)) {}

}  // namespace ember::cpu::avx2
