// The strided backward-data pass of strided_conv_backward_data.h, by sub-pixel decomposition. The
// input pixels whose row and column leave the same remainders modulo the strides form one class,
// and every pixel of a class is reached by the same taps, each from an output pixel that moves one
// step per class pixel. A class is therefore an unstrided correlation of dy with a sub-kernel,
// and each input pixel is written exactly once, zeros included: no zero fill of dx beforehand
// and no read-modify-write per tap, as a scatter over the taps would need. A tile (avx2_tile.h)
// of up to 3 class pixels of one row x 32 input channels (6 x 16 or 6 x 8 for the last channels)
// keeps its sums in vector registers over all the taps and output channels, broadcasting one dy
// value per pixel against the weights' vectors, which are repacked per call in the order the tile
// walks them (at most 9 * O * C floats). Class pixels at the image's edges, which fewer taps
// reach, run as tiles of one pixel. Threads take whole input rows.
#include "core/cpu/conv/strided_conv_backward_data.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/cpu/avx2_tile.h"
#include "core/cpu/streaming_stores.h"
#include "core/cpu/thread_pool.h"

namespace ember::cpu {

namespace {

// One axis of one class: input positions stride * q + r. The taps that reach them are
// k = first + j * stride (j < count), and tap j reads output position q + base - j. The tile walks
// the taps as t = count - 1 - j, so that consecutive taps read consecutive output positions,
// starting at q + lead.
struct AxisClass {
  int64_t count = 0, first = 0, base = 0;
  int64_t pixels = 0;  // class positions in the axis
  int64_t lead() const { return base - count + 1; }
  int64_t kernel_index(int64_t t, int64_t stride) const { return first + (count - 1 - t) * stride; }
  // The taps [lo, hi) (in walk order) of class position q that land inside `out` outputs.
  std::pair<int64_t, int64_t> valid(int64_t q, int64_t out) const {
    const int64_t j_lo = std::max<int64_t>(0, q + base - out + 1), j_hi = std::min(count - 1, q + base);
    if (j_lo > j_hi) return {0, 0};
    return {count - 1 - j_hi, count - j_lo};
  }
};

AxisClass axis_class(int64_t r, int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  AxisClass a;
  a.first = (r + pad) % stride;
  a.count = a.first < kernel ? (kernel - a.first + stride - 1) / stride : 0;
  a.base = (r + pad - a.first) / stride;
  a.pixels = r < size ? (size - r + stride - 1) / stride : 0;
  return a;
}

std::vector<AxisClass> axis_classes(int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  std::vector<AxisClass> classes;
  for (int64_t r = 0; r < stride; ++r) classes.push_back(axis_class(r, size, kernel, stride, pad));
  return classes;
}

// A column class's interior: class pixels [lo, hi) that every tap reaches, split into tiles.
struct Interior {
  int64_t lo, hi;
  avx2::TileSplit split;
};

Interior interior(const AxisClass& a, int64_t out) {
  const int64_t lo = std::min(a.pixels, std::max<int64_t>(0, a.count - 1 - a.base));
  const int64_t hi = a.count > 0 ? std::clamp(out - a.base, lo, a.pixels) : lo;
  return {lo, hi, avx2::TileSplit(hi - lo)};
}

// Zeroes n floats at p (n % 8 == 0; 32-byte aligned when streaming), one vector at a time.
__attribute__((target("avx2"))) void zero(float* p, int64_t n, bool streaming) {
  const __m256 zeros = _mm256_setzero_ps();
  if (streaming)
    for (int64_t i = 0; i < n; i += 8) _mm256_stream_ps(p + i, zeros);
  else
    for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(p + i, zeros);
}

// Input rows a thread should take at once: ~64K multiply-adds.
int64_t row_grain(const DirectConvGeometry& g) {
  const int64_t taps = std::max<int64_t>(1, g.kh * g.kw / (g.stride_h * g.stride_w));
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, g.w * g.c * g.o * taps));
}

}  // namespace

// Streaming stores skip reading each line before overwriting it (glibc's memset streams past a
// similar size): a dx as large as the last-level cache could not stay there for its consumer
// anyway, and a strided 1x1 pass (three quarters zeros) gains most from them (figures:
// docs/BENCHMARKS.md, notes moved from code comments).
bool streaming_zeros_preferred(const DirectConvGeometry& g) {
  const size_t bytes = static_cast<size_t>(g.n * g.h * g.w * g.c) * sizeof(float);
  return g.c % 16 == 0 && bytes >= last_level_cache_bytes();
}

// The rule tools/bench/conv measured on an AVX2-only CPU: strided 3x3 layers beat oneDNN's
// channels-last kernel; a strided 1x1 pass, whose dx is three quarters zeros, gains only when the
// zeros stream, and oneDNN keeps it otherwise. So it does where dy's rows have fewer than 8 pixels,
// too few for the weights a tile walks to be reused enough (figures: docs/BENCHMARKS.md, notes
// moved from code comments).
bool strided_conv_backward_data_preferred(const DirectConvGeometry& g) {
  const bool pays = (g.kh > 1 || g.kw > 1 || streaming_zeros_preferred(g)) && g.out_w() >= 8;
  return strided_conv_backward_data_applies(g) && avx2::preferred_cpu() && (g.stride_h > 1 || g.stride_w > 1) &&
         g.n > 0 && g.c > 0 && g.o > 0 && pays;
}

bool strided_conv_backward_data_applies(const DirectConvGeometry& g) {
  return avx2::supported() && g.dilation_h == 1 && g.dilation_w == 1 && g.kh <= 3 && g.kw <= 3 && g.c % 8 == 0;
}

void strided_conv_backward_data(const DirectConvGeometry& g, const float* dy, const float* weight, float* dx) {
  strided_conv_backward_data(g, dy, weight, dx, streaming_zeros_preferred(g));
}

void strided_conv_backward_data(const DirectConvGeometry& g, const float* dy, const float* weight, float* dx,
                                bool streaming) {
  // Streaming stores need 32-byte aligned vectors: a dx that is not (never one Ember allocates)
  // takes the cached path.
  streaming = streaming && reinterpret_cast<uintptr_t>(dx) % 32 == 0 && g.c % 8 == 0;
  const int64_t oh_count = g.out_h(), ow_count = g.out_w();
  const std::vector<AxisClass> row_classes = axis_classes(g.h, g.kh, g.stride_h, g.pad_h);
  const std::vector<AxisClass> col_classes = axis_classes(g.w, g.kw, g.stride_w, g.pad_w);
  std::vector<Interior> interiors;
  for (const AxisClass& a : col_classes) interiors.push_back(interior(a, ow_count));

  // Weights per class (row class major), [tap row][tap column][O][C] in walk order.
  std::vector<int64_t> packed_at;
  std::vector<float> packed;
  for (const AxisClass& ra : row_classes)
    for (const AxisClass& ca : col_classes) {
      packed_at.push_back(static_cast<int64_t>(packed.size()));
      for (int64_t th = 0; th < ra.count; ++th)
        for (int64_t tw = 0; tw < ca.count; ++tw) {
          const int64_t i = ra.kernel_index(th, g.stride_h), j = ca.kernel_index(tw, g.stride_w);
          for (int64_t o = 0; o < g.o; ++o)
            for (int64_t c = 0; c < g.c; ++c) packed.push_back(weight[((o * g.c + c) * g.kh + i) * g.kw + j]);
        }
    }

  parallel_for(0, g.n * g.h, row_grain(g), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const int64_t n = row / g.h, ih = row % g.h;
      float* out_row = dx + row * g.w * g.c;
      const int64_t rh = ih % g.stride_h, p = ih / g.stride_h;
      const AxisClass& ra = row_classes[rh];
      const auto [th0, th1] = ra.valid(p, oh_count);
      if (th0 == th1) {
        zero(out_row, g.w * g.c, streaming);
        continue;
      }
      const float* dy_rows = dy + (n * oh_count + p + ra.lead() + th0) * ow_count * g.o;
      for (int64_t rw = 0; rw < g.stride_w; ++rw) {
        const AxisClass& ca = col_classes[rw];
        float* out = out_row + rw * g.c;
        const int64_t ld_out = g.stride_w * g.c;
        if (ca.count == 0) {
          for (int64_t q = 0; q < ca.pixels; ++q) zero(out + q * ld_out, g.c, streaming);
          continue;
        }
        const float* v = packed.data() + packed_at[rh * g.stride_w + rw] + th0 * ca.count * g.o * g.c;
        // Per class pixel, its taps' O values of dy (consecutive taps are consecutive pixels of
        // dy, so one tap row is count * O consecutive floats) times the packed weights.
        avx2::Walk walk{th1 - th0, ca.count * g.o, ow_count * g.o, ca.count * g.o * g.c, 1, g.c, g.o};
        const Interior& in = interiors[rw];
        for (int64_t c0 = 0; c0 < g.c; c0 += avx2::lanes_for(g.c - c0)) {
          const int lanes = avx2::lanes_for(g.c - c0);
          const std::vector<int64_t>& starts = in.split.starts(lanes);
          for (size_t t = 0; t + 1 < starts.size(); ++t) {
            const int64_t q0 = in.lo + starts[t];
            const int tile_rows = static_cast<int>(starts[t + 1] - starts[t]);
            avx2::tile(tile_rows, lanes)(walk, dy_rows + (q0 + ca.lead()) * g.o, v + c0, out + q0 * ld_out + c0, ld_out,
                                         /*accumulate=*/false);
          }
        }
        for (int64_t q = 0; q < ca.pixels; ++q) {
          if (q == in.lo && in.hi > in.lo) q = in.hi;
          if (q >= ca.pixels) break;
          const auto [tw0, tw1] = ca.valid(q, ow_count);
          if (tw0 == tw1) {
            zero(out + q * ld_out, g.c, streaming);
            continue;
          }
          avx2::Walk edge = walk;
          edge.cols = (tw1 - tw0) * g.o;
          for (int64_t c0 = 0; c0 < g.c; c0 += avx2::lanes_for(g.c - c0))
            avx2::tile(1, avx2::lanes_for(g.c - c0))(edge, dy_rows + (q + ca.lead() + tw0) * g.o,
                                                     v + tw0 * g.o * g.c + c0, out + q * ld_out + c0, ld_out,
                                                     /*accumulate=*/false);
        }
      }
    }
    if (streaming) stream_fence();  // before whatever reads dx next
  });
}

}  // namespace ember::cpu
