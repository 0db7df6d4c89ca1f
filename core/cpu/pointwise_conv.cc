// The strided 1x1 backward-data pass of pointwise_conv.h: each row of dy's pixels times the
// weights [O, C] (in L1), written to every stride-th pixel of an input row, whose other pixels are
// zeroed while the row is still in cache. A tile (avx2_tile.h) of up to 6 pixels x 16 input
// channels keeps its sums in vector registers over the whole reduction, loading two vectors of
// weights and broadcasting one value of dy per pixel for each step. Threads take whole rows.
#include "core/cpu/pointwise_conv.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu/avx2_tile.h"
#include "core/cpu/thread_pool.h"

namespace ember::cpu {

namespace {

bool strided_pointwise(const DirectConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.pad_h == 0 && g.pad_w == 0 && (g.stride_h > 1 || g.stride_w > 1) &&
         g.n > 0 && g.c > 0 && g.o > 0;
}

// Rows a thread should take at once: ~64K multiply-adds.
int64_t row_grain(const DirectConvGeometry& g) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, g.out_w() * g.c * g.o));
}

}  // namespace

// Measured with tools/bench/conv (batch 128, 2 threads) on an AVX2-only CPU (AMD EPYC, Zen 1):
// 0.98-0.99 of oneDNN's blocked kernel where its channels-last one ran 0.71-0.87.
bool pointwise_conv_backward_data_preferred(const DirectConvGeometry& g) {
  return avx2::preferred_cpu() && strided_pointwise(g) && g.c % 8 == 0;
}

void pointwise_conv_backward_data(const DirectConvGeometry& g, const float* dy, const float* weight, float* dx) {
  const int64_t oh_count = g.out_h(), ow_count = g.out_w();
  const size_t pixel_bytes = static_cast<size_t>(g.c) * sizeof(float);
  const std::vector<int64_t> starts = avx2::tile_starts(ow_count);  // pixel tiles of a row
  // Per pixel, its O values of dy (broadcast, a pixel per tile row) times weight [O, C].
  const avx2::Walk walk{1, g.o, 0, 0, 1, g.c, g.o};
  parallel_for(0, g.n * g.h, row_grain(g), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const int64_t n = row / g.h, ih = row % g.h;
      float* out = dx + row * g.w * g.c;
      if (ih % g.stride_h != 0 || ih / g.stride_h >= oh_count) {
        std::memset(out, 0, pixel_bytes * static_cast<size_t>(g.w));
        continue;
      }
      const float* dy_row = dy + (n * oh_count + ih / g.stride_h) * ow_count * g.o;
      for (size_t t = 0; t + 1 < starts.size(); ++t) {
        const int64_t p0 = starts[t];
        const int tile_rows = static_cast<int>(starts[t + 1] - p0);
        for (int64_t c0 = 0; c0 < g.c; c0 += 16)
          avx2::tile(tile_rows, static_cast<int>(g.c - c0))(walk, dy_row + p0 * g.o, weight + c0,
                                                            out + p0 * g.stride_w * g.c + c0, g.stride_w * g.c,
                                                            /*accumulate=*/false);
      }
      for (int64_t iw = 0; iw < g.w; ++iw)
        if (iw % g.stride_w != 0 || iw / g.stride_w >= ow_count) std::memset(out + iw * g.c, 0, pixel_bytes);
    }
  });
}

}  // namespace ember::cpu
