// The strided 1x1 backward-data pass of pointwise_conv.h: each row of dy's pixels times the
// weights [O, C] (in L1), written to every stride-th pixel of an input row, whose other pixels are
// zeroed while the row is still in cache. A tile of up to 6 pixels x 16 input channels keeps its
// 12 sums in vector registers over the whole reduction, loading two vectors of weights and
// broadcasting one value of dy per pixel for each step. Threads take whole rows.
#include "core/cpu/pointwise_conv.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/cpu/thread_pool.h"

namespace ember::cpu {

namespace {

#define EMBER_AVX2 __attribute__((target("avx2,fma")))

constexpr int kMaxPixels = 6;

// The operands of one row's product: `a` pixels (`a_step` floats apart, `depth` values each) times
// `m` [depth][ld_m], written to `out` pixels `out_step` floats apart, `width` lanes each.
struct RowProduct {
  const float* a;
  int64_t a_step, depth;
  const float* m;
  int64_t ld_m;
  float* out;
  int64_t out_step, width;
};

template <int MP, int NC>
EMBER_AVX2 void tile(const RowProduct& r, const float* a, const float* m, float* out) {
  __m256 sum[MP][NC];
#pragma GCC unroll 8
  for (int i = 0; i < MP; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j) sum[i][j] = _mm256_setzero_ps();
  const int64_t depth = r.depth, a_step = r.a_step, ld_m = r.ld_m;
  for (int64_t k = 0; k < depth; ++k, m += ld_m, ++a) {
    __m256 mv[NC];
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j) mv[j] = _mm256_loadu_ps(m + 8 * j);
#pragma GCC unroll 8
    for (int i = 0; i < MP; ++i) {
      const __m256 b = _mm256_broadcast_ss(a + i * a_step);
#pragma GCC unroll 2
      for (int j = 0; j < NC; ++j) sum[i][j] = _mm256_fmadd_ps(b, mv[j], sum[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MP; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j) _mm256_storeu_ps(out + i * r.out_step + 8 * j, sum[i][j]);
}

using Tile = void (*)(const RowProduct&, const float*, const float*, float*);

template <int NC>
Tile pick(int mp) {
  switch (mp) {
    case 1: return tile<1, NC>;
    case 2: return tile<2, NC>;
    case 3: return tile<3, NC>;
    case 4: return tile<4, NC>;
    case 5: return tile<5, NC>;
    default: return tile<6, NC>;
  }
}

// All `pixels` of one row, in tiles of at most kMaxPixels split as evenly as possible.
void row_product(const RowProduct& r, int64_t pixels) {
  const int64_t tiles = (pixels + kMaxPixels - 1) / kMaxPixels;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t p0 = t * pixels / tiles, p1 = (t + 1) * pixels / tiles;
    const int mp = static_cast<int>(p1 - p0);
    for (int64_t c0 = 0; c0 < r.width; c0 += 16) {
      const Tile kernel = r.width - c0 >= 16 ? pick<2>(mp) : pick<1>(mp);
      kernel(r, r.a + p0 * r.a_step, r.m + c0, r.out + p0 * r.out_step + c0);
    }
  }
}

bool strided_pointwise(const DirectConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.pad_h == 0 && g.pad_w == 0 && (g.stride_h > 1 || g.stride_w > 1) &&
         g.n > 0 && g.c > 0 && g.o > 0;
}

bool avx2_only() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return pointwise_conv_supported() && !avx512;
}

// Rows a thread should take at once: ~64K multiply-adds.
int64_t row_grain(const DirectConvGeometry& g) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, g.out_w() * g.c * g.o));
}

}  // namespace

bool pointwise_conv_supported() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
}

// Measured with tools/bench/conv (batch 128, 2 threads) on an AVX2-only CPU (AMD EPYC, Zen 1):
// 0.98-0.99 of oneDNN's blocked kernel where its channels-last one ran 0.71-0.87.
bool pointwise_conv_backward_data_preferred(const DirectConvGeometry& g) {
  return avx2_only() && strided_pointwise(g) && g.c % 8 == 0;
}

void pointwise_conv_backward_data(const DirectConvGeometry& g, const float* dy, const float* weight, float* dx) {
  const int64_t oh_count = g.out_h(), ow_count = g.out_w();
  const size_t pixel_bytes = static_cast<size_t>(g.c) * sizeof(float);
  parallel_for(0, g.n * g.h, row_grain(g), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const int64_t n = row / g.h, ih = row % g.h;
      float* out = dx + row * g.w * g.c;
      if (ih % g.stride_h != 0 || ih / g.stride_h >= oh_count) {
        std::memset(out, 0, pixel_bytes * static_cast<size_t>(g.w));
        continue;
      }
      const RowProduct r{dy + (n * oh_count + ih / g.stride_h) * ow_count * g.o, g.o, g.o, weight, g.c,
                         out, g.stride_w * g.c, g.c};
      row_product(r, ow_count);
      for (int64_t iw = 0; iw < g.w; ++iw)
        if (iw % g.stride_w != 0 || iw / g.stride_w >= ow_count) std::memset(out + iw * g.c, 0, pixel_bytes);
    }
  });
}

}  // namespace ember::cpu
