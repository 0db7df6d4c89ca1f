// The weight gradient of direct_conv_weight_grad.h. Each kernel tap's gradient is a small matrix
// [O, C] summed over every output pixel: dy's row of the pixel times x's row of the input pixel
// under that tap. A tile of up to 6 rows x 16 columns of it keeps its 12 sums in vector registers
// while it walks all the pixels of one image that see the tap (a rectangle of output rows and
// columns, since padding only trims its edges): per pixel it loads one or two vectors from one
// side and broadcasts up to 6 values of the other, for 12 multiply-adds. The vectors run over the
// input channels when C is a multiple of 8 (broadcasting dy), else over the output channels
// (broadcasting x: the 3-channel stem). Threads take whole images into their own sums, added
// together at the end.
#include "core/cpu/direct_conv_weight_grad.h"

#include <immintrin.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/cpu/thread_pool.h"

namespace ember::cpu {

namespace {

#define EMBER_AVX2 __attribute__((target("avx2,fma")))

constexpr int kMaxTile = 6;

// Strides of one tap's pixel rectangle, `rows` output rows of `cols` pixels each, on the side whose
// values are broadcast (b) and the side loaded as vectors (v).
struct Walk {
  int64_t rows, cols;
  int64_t b_row, v_row;  // floats between consecutive rows
  int64_t b_col, v_col;  // floats between consecutive pixels of a row
};

// acc[i][0..8*NC) += sum over the rectangle of b[pixel][i] * v[pixel][0..8*NC), i < MO.
template <int MO, int NC>
EMBER_AVX2 void accumulate(const Walk& walk, const float* b, const float* v, float* acc, int64_t ld_acc) {
  __m256 sum[MO][NC];
#pragma GCC unroll 8
  for (int i = 0; i < MO; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j) sum[i][j] = _mm256_loadu_ps(acc + i * ld_acc + 8 * j);
  // One loop over the rectangle's pixels (a nested row loop made GCC keep the sums in memory).
  const int64_t cols = walk.cols, b_col = walk.b_col, v_col = walk.v_col;
  const int64_t b_skip = walk.b_row - cols * b_col, v_skip = walk.v_row - cols * v_col;
  const int64_t pixels = walk.rows * cols;
  int64_t col = 0;
  for (int64_t p = 0; p < pixels; ++p) {
    __m256 vv[NC];
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j) vv[j] = _mm256_loadu_ps(v + 8 * j);
#pragma GCC unroll 8
    for (int i = 0; i < MO; ++i) {
      const __m256 bb = _mm256_broadcast_ss(b + i);
#pragma GCC unroll 2
      for (int j = 0; j < NC; ++j) sum[i][j] = _mm256_fmadd_ps(bb, vv[j], sum[i][j]);
    }
    b += b_col, v += v_col;
    if (++col == cols) col = 0, b += b_skip, v += v_skip;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MO; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j) _mm256_storeu_ps(acc + i * ld_acc + 8 * j, sum[i][j]);
}

using Accumulate = void (*)(const Walk&, const float*, const float*, float*, int64_t);

template <int NC>
Accumulate pick(int mo) {
  switch (mo) {
    case 1: return accumulate<1, NC>;
    case 2: return accumulate<2, NC>;
    case 3: return accumulate<3, NC>;
    case 4: return accumulate<4, NC>;
    case 5: return accumulate<5, NC>;
    default: return accumulate<6, NC>;
  }
}

// Splits `rows` broadcast channels into tiles of at most kMaxTile, as even as possible (a last
// tile of 1-2 would leave too few independent sums to keep the multiply-add unit busy).
std::vector<int64_t> tile_starts(int64_t rows) {
  const int64_t tiles = (rows + kMaxTile - 1) / kMaxTile;
  std::vector<int64_t> starts;
  for (int64_t t = 0; t <= tiles; ++t) starts.push_back(t * rows / tiles);
  return starts;
}

// The output positions [lo, hi) whose input position pos * stride - pad + tap * dilation lies in
// [0, size).
std::pair<int64_t, int64_t> valid_range(int64_t out, int64_t size, int64_t stride, int64_t pad, int64_t offset) {
  const int64_t shift = offset - pad;  // input = pos * stride + shift
  int64_t lo = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
  int64_t hi = size - 1 - shift < 0 ? 0 : (size - 1 - shift) / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
  return {lo, hi};
}

// Whether the vectors run over input channels (acc per tap [O][C]) or output channels ([C][O]).
bool vectors_over_input(const DirectConvGeometry& g) { return g.c % 8 == 0; }

// Adds images [n0, n1)'s contributions to acc [KH * KW][O][C] (or [KH * KW][C][O]).
void run_images(const DirectConvGeometry& g, const float* x, const float* dy, int64_t n0, int64_t n1, float* acc) {
  const int64_t oh_count = g.out_h(), ow_count = g.out_w();
  const bool over_input = vectors_over_input(g);
  const int64_t rows = over_input ? g.o : g.c, width = over_input ? g.c : g.o;
  const std::vector<int64_t> starts = tile_starts(rows);
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t i = 0; i < g.kh; ++i) {
      const auto [oh_lo, oh_hi] = valid_range(oh_count, g.h, g.stride_h, g.pad_h, i * g.dilation_h);
      if (oh_lo == oh_hi) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const auto [ow_lo, ow_hi] = valid_range(ow_count, g.w, g.stride_w, g.pad_w, j * g.dilation_w);
        if (ow_lo == ow_hi) continue;
        const int64_t dy_row = ow_count * g.o, x_row = g.stride_h * g.w * g.c, x_col = g.stride_w * g.c;
        const Walk walk = over_input ? Walk{oh_hi - oh_lo, ow_hi - ow_lo, dy_row, x_row, g.o, x_col}
                                     : Walk{oh_hi - oh_lo, ow_hi - ow_lo, x_row, dy_row, x_col, g.o};
        const int64_t ih = oh_lo * g.stride_h - g.pad_h + i * g.dilation_h;
        const int64_t iw = ow_lo * g.stride_w - g.pad_w + j * g.dilation_w;
        const float* dy0 = dy + ((n * oh_count + oh_lo) * ow_count + ow_lo) * g.o;
        const float* x0 = x + ((n * g.h + ih) * g.w + iw) * g.c;
        const float* b0 = over_input ? dy0 : x0;
        const float* v0 = over_input ? x0 : dy0;
        float* tap = acc + (i * g.kw + j) * g.o * g.c;
        for (size_t t = 0; t + 1 < starts.size(); ++t) {
          const int64_t r0 = starts[t];
          const int mo = static_cast<int>(starts[t + 1] - r0);
          for (int64_t c0 = 0; c0 < width; c0 += 16) {
            const Accumulate kernel = width - c0 >= 16 ? pick<2>(mo) : pick<1>(mo);
            kernel(walk, b0 + r0, v0 + c0, tap + r0 * width + c0, width);
          }
        }
      }
    }
}

}  // namespace

bool direct_conv_weight_grad_supported() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
}

// Measured with tools/bench/conv (batch 128, 2 threads) on an AVX2-only CPU (AMD EPYC, Zen 1).
// On the AVX-512 VM (Zen 4) oneDNN's channels-last kernels ran at 0.92-1.17 of its blocked ones, and
// this kernel, at half their vector width, is not used there.
bool direct_conv_weight_grad_preferred(const DirectConvGeometry& g) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return direct_conv_weight_grad_supported() && !avx512 && (g.c % 8 == 0 || g.o % 8 == 0) && g.n > 0;
}

void direct_conv_weight_grad(const DirectConvGeometry& g, const float* x, const float* dy, float* grad_weight) {
  const int64_t taps = g.kh * g.kw, per_tap = g.o * g.c;
  const bool over_input = vectors_over_input(g);
  // Each chunk of images sums into its own buffer; adding them in chunk order keeps the result
  // the same from call to call.
  std::mutex mutex;
  std::vector<std::pair<int64_t, std::vector<float>>> chunks;
  parallel_for(0, g.n, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> acc(static_cast<size_t>(taps * per_tap), 0.0f);
    run_images(g, x, dy, lo, hi, acc.data());
    std::lock_guard<std::mutex> lock(mutex);
    chunks.emplace_back(lo, std::move(acc));
  });
  std::sort(chunks.begin(), chunks.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<float> total(static_cast<size_t>(taps * per_tap), 0.0f);
  for (const auto& chunk : chunks)
    for (size_t k = 0; k < total.size(); ++k) total[k] += chunk.second[k];
  for (int64_t o = 0; o < g.o; ++o)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t t = 0; t < taps; ++t)
        grad_weight[(o * g.c + c) * taps + t] =
            total[static_cast<size_t>(t * per_tap + (over_input ? o * g.c + c : c * g.o + o))];
}

}  // namespace ember::cpu
