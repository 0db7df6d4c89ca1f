// The forward pass of strided_conv_forward.h. Per output row, a tile (avx2_tile.h) of up to 3
// output pixels x 32 output channels (6 x 16 or 6 x 8 for the last channels) keeps its sums in
// vector registers over the whole reduction: the kernel rows inside the image, and per kernel row
// its taps and input channels, which are one run of KW * C consecutive floats of x (the taps of
// one output pixel read consecutive input pixels). Each step broadcasts one value of x per pixel
// (pixels stride_w input pixels apart) against the weights' vectors, repacked per call so that
// each chunk of output channels walks its own contiguous [KH][KW][C][lanes]. Threads take whole
// output rows.
#include "core/cpu/conv/strided_conv_forward.h"

#include <xmmintrin.h>

#include <algorithm>
#include <vector>

#include "core/cpu/avx2_tile.h"
#include "core/cpu/thread_pool.h"

namespace ember::cpu {

namespace {

// The taps [lo, hi) of a kernel axis whose input position out * stride - pad + tap lies in
// [0, size).
std::pair<int64_t, int64_t> valid_taps(int64_t out, int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t start = out * stride - pad;
  const int64_t lo = std::clamp<int64_t>(-start, 0, kernel), hi = std::clamp<int64_t>(size - start, lo, kernel);
  return {lo, hi};
}

constexpr int64_t kPrefetchRows = 4;

// Output rows a thread should take at once: ~64K multiply-adds.
int64_t row_grain(const DirectConvGeometry& g) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, g.out_w() * g.o * g.c * g.kh * g.kw));
}

// Output pixels [a, b) of one row for one chunk of `lanes` output channels: one tile over the taps
// of each kernel row that all its pixels see, then, for a tile at the padded edge, one more per tap
// that only some of them see, over those (rather than tiles of one pixel, which run at a third
// of the rate and cost a measurable share of the layer on short rows).
void run_pixels(const DirectConvGeometry& g, const avx2::Walk& walk, int64_t a, int64_t b, const float* x_rows,
                const float* v, float* out, int lanes, bool accumulate) {
  auto taps_of = [&](int64_t ow) { return valid_taps(ow, g.w, g.kw, g.stride_w, g.pad_w); };
  const int64_t shared_lo = taps_of(a).first, shared_hi = taps_of(b - 1).second;
  auto run = [&](int64_t p0, int64_t p1, int64_t j0, int64_t j1) {
    avx2::Walk part = walk;
    part.cols = (j1 - j0) * g.c;
    avx2::tile(static_cast<int>(p1 - p0), lanes)(part, x_rows + (p0 * g.stride_w - g.pad_w + j0) * g.c,
                                                 v + j0 * g.c * lanes, out + p0 * g.o, g.o, accumulate);
    accumulate = true;
  };
  if (shared_lo < shared_hi) {
    run(a, b, shared_lo, shared_hi);
  } else if (!accumulate) {
    for (int64_t p = a; p < b; ++p) std::fill_n(out + p * g.o, lanes, 0.0f);
    accumulate = true;
  }
  for (int64_t j = 0; j < g.kw; ++j) {
    if (j >= shared_lo && j < shared_hi) continue;
    auto reaches = [&](int64_t ow) { return taps_of(ow).first <= j && j < taps_of(ow).second; };
    int64_t p0 = a, p1 = b;  // the pixels tap j reaches: a contiguous run
    while (p0 < p1 && !reaches(p0)) ++p0;
    while (p1 > p0 && !reaches(p1 - 1)) --p1;
    if (p0 < p1) run(p0, p1, j, j + 1);
  }
}

}  // namespace

// The rule tools/bench/conv measured on an AVX2-only CPU: close to oneDNN's blocked kernel on
// strided 3x3 layers with output rows of 8 or more pixels. With fewer, each weight vector serves
// too few pixels of a tile, and oneDNN's channels-last kernel keeps such layers (figures:
// docs/BENCHMARKS.md, notes moved from code comments).
bool strided_conv_forward_preferred(const DirectConvGeometry& g) {
  return strided_conv_forward_applies(g) && avx2::preferred_cpu() && (g.stride_h > 1 || g.stride_w > 1) && g.n > 0 &&
         g.c > 0 && g.out_w() >= 8;
}

bool strided_conv_forward_applies(const DirectConvGeometry& g) {
  return avx2::supported() && g.dilation_h == 1 && g.dilation_w == 1 && g.kh == 3 && g.kw == 3 && g.o % 8 == 0;
}

void strided_conv_forward(const DirectConvGeometry& g, const float* x, const float* weight, const float* bias,
                          float* y) {
  const int64_t oh_count = g.out_h(), ow_count = g.out_w();
  // Per chunk of output channels, [KH][KW][C][lanes]: a chunk's weights lie together (18 KB on
  // 32->64 channels for 16 lanes; interleaved with the other chunks, its tiles touched 72 KB, past
  // L1, and ran well below oneDNN's blocked kernel).
  const int64_t taps = g.kh * g.kw * g.c;
  std::vector<float> packed(static_cast<size_t>(taps * g.o));
  for (int64_t o0 = 0; o0 < g.o; o0 += avx2::lanes_for(g.o - o0)) {
    const int64_t lanes = avx2::lanes_for(g.o - o0);
    float* chunk = packed.data() + o0 * taps;
    for (int64_t o = 0; o < lanes; ++o)
      for (int64_t c = 0; c < g.c; ++c)
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j)
            chunk[((i * g.kw + j) * g.c + c) * lanes + o] = weight[(((o0 + o) * g.c + c) * g.kh + i) * g.kw + j];
  }

  const avx2::TileSplit split(ow_count);
  const int64_t x_row = g.w * g.c;

  // One output row's pixels for one chunk of output channels.
  auto run_row = [&](int64_t row, int64_t o0) {
    const int64_t n = row / oh_count, oh = row % oh_count;
    float* out = y + row * ow_count * g.o + o0;
    const int lanes = avx2::lanes_for(g.o - o0);
    const std::vector<int64_t>& starts = split.starts(lanes);
    const bool accumulate = bias != nullptr;
    if (accumulate)
      for (int64_t ow = 0; ow < ow_count; ++ow) std::copy(bias + o0, bias + o0 + lanes, out + ow * g.o);
    const auto [k0, k1] = valid_taps(oh, g.h, g.kh, g.stride_h, g.pad_h);
    if (k0 == k1) {
      if (!accumulate)
        for (int64_t ow = 0; ow < ow_count; ++ow) std::fill_n(out + ow * g.o, lanes, 0.0f);
      return;
    }
    const float* x_rows = x + (n * g.h + oh * g.stride_h - g.pad_h + k0) * x_row;
    const float* v = packed.data() + o0 * taps + k0 * g.kw * g.c * lanes;
    const avx2::Walk walk{k1 - k0, g.kw * g.c, x_row, g.kw * g.c * lanes, 1, lanes, g.stride_w * g.c};
    for (size_t t = 0; t + 1 < starts.size(); ++t)
      run_pixels(g, walk, starts[t], starts[t + 1], x_rows, v, out, lanes, accumulate);
  };
  // The input rows that the output row kPrefetchRows ahead adds, fetched into L2 now: the
  // hardware prefetchers alone left the multiply-adds waiting on them.
  auto prefetch_for = [&](int64_t row) {
    const int64_t oh = row % oh_count, n = row / oh_count;
    const auto [k0, k1] = valid_taps(oh, g.h, g.kh, g.stride_h, g.pad_h);
    const int64_t first = std::max(k0, k1 - g.stride_h);
    const float* from = x + (n * g.h + oh * g.stride_h - g.pad_h + first) * x_row;
    const float* to = x + (n * g.h + oh * g.stride_h - g.pad_h + k1) * x_row;
    for (; from < to; from += 16) _mm_prefetch(reinterpret_cast<const char*>(from), _MM_HINT_T1);
  };
  parallel_for(0, g.n * oh_count, row_grain(g), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      if (row + kPrefetchRows < hi) prefetch_for(row + kPrefetchRows);
      for (int64_t o0 = 0; o0 < g.o; o0 += avx2::lanes_for(g.o - o0)) run_row(row, o0);
    }
  });
}

}  // namespace ember::cpu
