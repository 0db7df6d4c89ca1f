// The GEMM of skinny_sgemm.h. C is computed in blocks of kBlock columns and, within a block, in
// panels of 32 columns (16 or 8 at the right edge). Per block and pass over K, B's rows are first
// copied into panels, [panel][step][lanes]; every row tile of C (avx2_tile.h: 3 rows x 32 lanes,
// 12 sums in vector registers) then reads its panel from L1. Read in place, a panel's 32-float
// pieces of rows a power of two apart (ldb = 131072 floats on the im2col shapes) all fall into the
// same cache sets, and no panel stayed cached across the row tiles (half the rate of copied
// panels). Copying the next block piecewise between the tiles of the current one, to overlap its
// misses with multiply-adds, measured no faster. Threads take contiguous ranges of panels. The
// figures: docs/BENCHMARKS.md, "Notes moved from code comments".
#include "core/cpu/skinny_sgemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cpu/avx2_tile.h"
#include "core/cpu/streaming_stores.h"
#include "core/cpu/thread_pool.h"

namespace ember::cpu {

namespace {

constexpr int64_t kPanel = 32;
constexpr int64_t kBlock = 256;
// The longest pass over K: a 32-lane panel of 160 steps is 20 KB, which leaves L1 room for the
// tile's rows of A. K is split into equal passes (144 as one, not 128 + 16).
constexpr int64_t kDepth = 160;
// Rows of B prefetched ahead of the copy: far enough to hide the miss, near enough that the line
// is not evicted first by the other rows, which share its cache sets.
constexpr int64_t kCopyAhead = 2;

struct Problem {
  bool trans_a;
  int64_t m, n, k;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  bool accumulate, streaming;
  float* c;
  int64_t ldc;
};

// B[k0 : k0 + depth, jb : jb + width] into panels.
__attribute__((target("avx2"))) void pack(const Problem& p, int64_t k0, int64_t depth, int64_t jb, int64_t width,
                                          float* packed) {
  for (int64_t s = 0; s < depth; ++s) {
    const float* row = p.b + (k0 + s) * p.ldb + jb;
    if (s + kCopyAhead < depth) {
      const char* ahead = reinterpret_cast<const char*>(row + kCopyAhead * p.ldb);
      for (int64_t x = 0; x < width * static_cast<int64_t>(sizeof(float)); x += 64)
        _mm_prefetch(ahead + x, _MM_HINT_T1);
    }
    for (int64_t j = 0; j < width;) {
      const int lanes = avx2::lanes_for(width - j);
      float* to = packed + j * depth + s * lanes;
      for (int l = 0; l < lanes; l += 8) _mm256_storeu_ps(to + l, _mm256_loadu_ps(row + j + l));
      j += lanes;
    }
  }
}

// Columns [n0, n1) of C, n1 - n0 a multiple of 8.
void run_columns(const Problem& p, const avx2::TileSplit& split, int64_t n0, int64_t n1) {
  const int64_t a_step = p.trans_a ? p.lda : 1, a_row = p.trans_a ? 1 : p.lda;
  const int64_t passes = (p.k + kDepth - 1) / kDepth;
  std::vector<float> packed(static_cast<size_t>(kDepth * kBlock));
  for (int64_t jb = n0; jb < n1; jb += kBlock) {
    const int64_t width = std::min(kBlock, n1 - jb);
    for (int64_t pass = 0, k0 = 0; pass < passes; ++pass) {
      const int64_t depth = p.k * (pass + 1) / passes - k0;
      pack(p, k0, depth, jb, width, packed.data());
      const bool accumulate = p.accumulate || k0 > 0;
      for (int64_t j = 0; j < width;) {
        const int lanes = avx2::lanes_for(width - j);
        const std::vector<int64_t>& starts = split.starts(lanes);
        const avx2::Walk walk{1, depth, 0, 0, a_step, lanes, a_row};
        for (size_t t = 0; t + 1 < starts.size(); ++t) {
          const int64_t i0 = starts[t];
          const int rows = static_cast<int>(starts[t + 1] - i0);
          const avx2::Tile tile = p.streaming ? avx2::streaming_tile(rows, lanes) : avx2::tile(rows, lanes);
          tile(walk, p.a + i0 * a_row + k0 * a_step, packed.data() + j * depth, p.c + i0 * p.ldc + jb + j, p.ldc,
               accumulate);
        }
        j += lanes;
      }
      k0 += depth;
    }
  }
  if (p.streaming) stream_fence();
}

// The last n % 8 columns, one sum at a time in the same order as the tiles.
void run_tail(const Problem& p, int64_t n0) {
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = n0; j < p.n; ++j) {
      float sum = p.accumulate ? p.c[i * p.ldc + j] : 0.0f;
      for (int64_t s = 0; s < p.k; ++s)
        sum += (p.trans_a ? p.a[s * p.lda + i] : p.a[i * p.lda + s]) * p.b[s * p.ldb + j];
      p.c[i * p.ldc + j] = sum;
    }
}

// C written once, in one pass over K, and too large to stay cached for its reader anyway.
bool streaming_preferred(int64_t m, int64_t n, int64_t k, bool accumulate) {
  return !accumulate && k <= kDepth && static_cast<size_t>(m * n) * sizeof(float) >= last_level_cache_bytes();
}

}  // namespace

// Where tools/bench/skinny_sweep (m 8-288, k 8-576, n 8K-128K, A plain and transposed, 2 threads)
// measured this kernel faster than oneDNN's sgemm in every run on an AVX2-only CPU: up to 144
// rows of C, and either a reduction of 64 or more over a B of 32K columns or 16 MB, or a short one
// into a C of 128K columns and 64 or more rows. Elsewhere the two were even or oneDNN was ahead in
// some run (the ratios: docs/BENCHMARKS.md, "Notes moved from code comments").
bool skinny_sgemm_preferred(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, float beta) {
  if (!avx2::preferred_cpu() || trans_b || alpha != 1.0f || (beta != 0.0f && beta != 1.0f) || m > 144) return false;
  const bool long_reduction = k >= 64 && (n >= 32768 || (!trans_a && k * n >= (int64_t{1} << 22)));
  const bool wide_output = k <= 32 && n >= 131072 && m >= 64;
  return long_reduction || wide_output;
}

void skinny_sgemm(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  skinny_sgemm(trans_a, m, n, k, a, lda, b, ldb, accumulate, c, ldc, streaming_preferred(m, n, k, accumulate));
}

void skinny_sgemm(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, bool accumulate, float* c, int64_t ldc, bool streaming) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    return;
  }
  streaming = streaming && !accumulate && reinterpret_cast<uintptr_t>(c) % 32 == 0 && ldc % 8 == 0;
  const Problem p{trans_a, m, n, k, a, lda, b, ldb, accumulate, streaming, c, ldc};
  const int64_t vector_n = n / 8 * 8;
  const avx2::TileSplit split(m);
  const int64_t panels = (vector_n + kPanel - 1) / kPanel;
  // A range of panels is worth a thread once it holds ~64K multiply-adds.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, kPanel * m * k));
  parallel_for(0, panels, grain,
               [&](int64_t lo, int64_t hi) { run_columns(p, split, lo * kPanel, std::min(vector_n, hi * kPanel)); });
  if (vector_n < n) run_tail(p, vector_n);
}

}  // namespace ember::cpu
