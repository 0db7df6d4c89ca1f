// The weight gradient of direct_conv_weight_grad.h. Each kernel tap's gradient is a small matrix
// [O, C] summed over every output pixel: dy's row of the pixel times x's row of the input pixel
// under that tap. A tile (avx2_tile.h) of up to 3 rows x 32 columns of it (6 x 16 or 6 x 8 for
// the last columns) keeps its sums in vector registers while it walks all the pixels of one image
// that see the tap (a rectangle of output rows and columns, since padding only trims its edges).
// The vectors run over the input channels when C is a multiple of 8 (broadcasting dy), else over
// the output channels (broadcasting x: the 3-channel stem). Threads take whole images into their
// own sums, added together at the end.
#include "core/cpu/conv/direct_conv_weight_grad.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/cpu/avx2_tile.h"
#include "core/cpu/thread_pool.h"

namespace ember::cpu {

namespace {

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
  const avx2::TileSplit split(rows);
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t i = 0; i < g.kh; ++i) {
      const auto [oh_lo, oh_hi] = valid_range(oh_count, g.h, g.stride_h, g.pad_h, i * g.dilation_h);
      if (oh_lo == oh_hi) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const auto [ow_lo, ow_hi] = valid_range(ow_count, g.w, g.stride_w, g.pad_w, j * g.dilation_w);
        if (ow_lo == ow_hi) continue;
        const int64_t dy_row = ow_count * g.o, x_row = g.stride_h * g.w * g.c, x_col = g.stride_w * g.c;
        const avx2::Walk walk = over_input ? avx2::Walk{oh_hi - oh_lo, ow_hi - ow_lo, dy_row, x_row, g.o, x_col, 1}
                                           : avx2::Walk{oh_hi - oh_lo, ow_hi - ow_lo, x_row, dy_row, x_col, g.o, 1};
        const int64_t ih = oh_lo * g.stride_h - g.pad_h + i * g.dilation_h;
        const int64_t iw = ow_lo * g.stride_w - g.pad_w + j * g.dilation_w;
        const float* dy0 = dy + ((n * oh_count + oh_lo) * ow_count + ow_lo) * g.o;
        const float* x0 = x + ((n * g.h + ih) * g.w + iw) * g.c;
        const float* b0 = over_input ? dy0 : x0;
        const float* v0 = over_input ? x0 : dy0;
        float* tap = acc + (i * g.kw + j) * g.o * g.c;
        for (int64_t c0 = 0; c0 < width; c0 += avx2::lanes_for(width - c0)) {
          const int lanes = avx2::lanes_for(width - c0);
          const std::vector<int64_t>& starts = split.starts(lanes);
          for (size_t t = 0; t + 1 < starts.size(); ++t) {
            const int64_t r0 = starts[t];
            avx2::tile(static_cast<int>(starts[t + 1] - r0), lanes)(walk, b0 + r0, v0 + c0, tap + r0 * width + c0,
                                                                    width, /*accumulate=*/true);
          }
        }
      }
    }
}

}  // namespace

// The rule tools/bench/conv measured on an AVX2-only CPU. With AVX-512, oneDNN's channels-last
// kernels keep up with its blocked ones, and this kernel, at half their vector width, is not
// preferred there (figures: docs/BENCHMARKS.md, notes moved from code comments).
bool direct_conv_weight_grad_preferred(const DirectConvGeometry& g) {
  return direct_conv_weight_grad_applies(g) && avx2::preferred_cpu() && g.n > 0;
}

bool direct_conv_weight_grad_applies(const DirectConvGeometry& g) {
  return avx2::supported() && (g.c % 8 == 0 || g.o % 8 == 0);
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
