// The direct convolution of direct_conv.h. Output pixels are taken kRows at a time: for each
// kernel tap, their input channels are first gathered (stride, dilation and zero padding applied)
// into a small buffer laid out [taps * C/16][kRows][16], an im2col of just this tile, which stays
// in L1. The inner loop then addresses every input and weight at a constant offset from two
// pointers (a buffer with a row stride of C was slower: the per-row pointers spilled out of
// the general-purpose registers), and each tile of kRows pixels x 32 output channels keeps its 16
// accumulators in vector registers over the whole sum. Channel counts that are not a multiple of
// 16 are zero-padded in the buffer and in the packed weights.
#include "core/cpu/conv/direct_conv.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu/isa.h"
#include "core/cpu/thread_pool.h"

namespace ember::cpu {

namespace {

constexpr int kRows = 8;     // output pixels per tile
constexpr int kVectors = 2;  // 16-channel output vectors per tile
constexpr int64_t kGroup = 16 * kVectors;

#define EMBER_AVX512 __attribute__((target("avx512f")))

// One tile: `xb` [blocks][kRows][16] gathered inputs, `wg` [blocks * 16][kGroup] packed weights
// of this group of output channels, `init` [kGroup] the bias (or zeros). Writes kRows x kGroup
// outputs, row stride `ldy`.
EMBER_AVX512 inline void tile(const float* xb, const float* wg, const float* init, int64_t blocks, float* y,
                              int64_t ldy) {
  __m512 acc[kRows][kVectors];
  for (int v = 0; v < kVectors; ++v) {
    const __m512 start = _mm512_loadu_ps(init + 16 * v);
    for (int r = 0; r < kRows; ++r) acc[r][v] = start;
  }
  for (int64_t cb = 0; cb < blocks; ++cb, xb += kRows * 16, wg += 16 * kGroup) {
#pragma GCC unroll 16
    for (int ci = 0; ci < 16; ++ci) {
      __m512 wv[kVectors];
      for (int v = 0; v < kVectors; ++v) wv[v] = _mm512_loadu_ps(wg + ci * kGroup + 16 * v);
      for (int r = 0; r < kRows; ++r) {
        const __m512 xv = _mm512_set1_ps(xb[r * 16 + ci]);
        for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_fmadd_ps(xv, wv[v], acc[r][v]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(y + r * ldy + 16 * v, acc[r][v]);
}

struct Packed {
  int64_t channel_blocks, blocks, groups;  // blocks = taps * channel_blocks
  std::vector<float> weights;              // [groups][blocks * 16][kGroup], zero-padded
  std::vector<float> bias;                 // [groups * kGroup], zero-padded
};

Packed pack(const DirectConvGeometry& g, const float* weight, const float* bias) {
  Packed p;
  const int64_t taps = g.kh * g.kw;
  p.channel_blocks = (g.c + 15) / 16;
  p.blocks = taps * p.channel_blocks;
  p.groups = (g.o + kGroup - 1) / kGroup;
  p.weights.assign(static_cast<size_t>(p.groups * p.blocks * 16 * kGroup), 0.0f);
  p.bias.assign(static_cast<size_t>(p.groups * kGroup), 0.0f);
  for (int64_t o = 0; o < g.o; ++o) {
    const int64_t group = o / kGroup, lane = o % kGroup;
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t row = (group * p.blocks + t * p.channel_blocks) * 16 + c;
        p.weights[static_cast<size_t>(row * kGroup + lane)] = weight[(o * g.c + c) * taps + t];
      }
    if (bias) p.bias[static_cast<size_t>(o)] = bias[o];
  }
  return p;
}

// Copies one pixel's C channels into one tap's channel blocks of the tile buffer (blocks
// kRows * 16 floats apart); `zeros` (padding) writes zeros instead.
EMBER_AVX512 inline void copy_pixel(const float* src, bool zeros, int64_t channel_blocks, __mmask16 tail_mask,
                                    float* dst) {
  if (zeros) {
    for (int64_t cb = 0; cb < channel_blocks; ++cb) _mm512_storeu_ps(dst + cb * kRows * 16, _mm512_setzero_ps());
    return;
  }
  for (int64_t cb = 0; cb + 1 < channel_blocks; ++cb)
    _mm512_storeu_ps(dst + cb * kRows * 16, _mm512_loadu_ps(src + cb * 16));
  const int64_t last = channel_blocks - 1;
  _mm512_storeu_ps(dst + last * kRows * 16, _mm512_maskz_loadu_ps(tail_mask, src + last * 16));
}

// Output pixels [begin, end) (flat over N, OH, OW).
EMBER_AVX512 void run_pixels(const DirectConvGeometry& geometry, const Packed& packed, const float* x, float* y,
                             int64_t begin, int64_t end) {
  // Locals, not geometry's fields: the vector stores below may alias anything, and the compiler
  // would reload every field after each of them (the gather ran at ~50 instructions per tap).
  const DirectConvGeometry g = geometry;
  const int64_t oh_count = g.out_h(), ow_count = g.out_w(), taps = g.kh * g.kw;
  const int64_t channel_blocks = packed.channel_blocks, tap_stride = channel_blocks * kRows * 16;
  std::vector<float> gathered(static_cast<size_t>(packed.blocks * kRows * 16), 0.0f);
  alignas(64) float partial[kRows * kGroup];
  const int64_t tail = g.c - (channel_blocks - 1) * 16;
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << tail) - 1);
  // Each tap's offset (in floats) from the input pixel under the kernel's top-left corner.
  std::vector<int64_t> tap_offset(static_cast<size_t>(taps));
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j)
      tap_offset[static_cast<size_t>(i * g.kw + j)] = (i * g.dilation_h * g.w + j * g.dilation_w) * g.c;
  const int64_t span_h = (g.kh - 1) * g.dilation_h, span_w = (g.kw - 1) * g.dilation_w;
  int64_t ow = begin % ow_count, oh = (begin / ow_count) % oh_count, n = begin / ow_count / oh_count;
  for (int64_t p = begin; p < end; p += kRows) {
    const int64_t rows = std::min<int64_t>(kRows, end - p);
    for (int64_t r = 0; r < rows; ++r) {
      float* dst = gathered.data() + r * 16;
      const int64_t ih0 = oh * g.stride_h - g.pad_h, iw0 = ow * g.stride_w - g.pad_w;
      const int64_t corner = ((n * g.h + ih0) * g.w + iw0) * g.c;  // may lie outside x: only an offset
      if (ih0 >= 0 && ih0 + span_h < g.h && iw0 >= 0 && iw0 + span_w < g.w) {
        for (int64_t t = 0; t < taps; ++t)
          copy_pixel(x + (corner + tap_offset[static_cast<size_t>(t)]), false, channel_blocks, tail_mask,
                     dst + t * tap_stride);
      } else {  // the kernel overlaps the padding
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t ih = ih0 + i * g.dilation_h, iw = iw0 + j * g.dilation_w, t = i * g.kw + j;
            const bool outside = ih < 0 || ih >= g.h || iw < 0 || iw >= g.w;
            copy_pixel(outside ? x : x + (corner + tap_offset[static_cast<size_t>(t)]), outside, channel_blocks,
                       tail_mask, dst + t * tap_stride);
          }
      }
      if (++ow == ow_count) {
        ow = 0;
        if (++oh == oh_count) oh = 0, ++n;
      }
    }
    for (int64_t group = 0; group < packed.groups; ++group) {
      const int64_t o0 = group * kGroup, width = std::min<int64_t>(kGroup, g.o - o0);
      const float* wg = packed.weights.data() + group * packed.blocks * 16 * kGroup;
      const float* init = packed.bias.data() + o0;
      if (rows == kRows && width == kGroup) {
        tile(gathered.data(), wg, init, packed.blocks, y + p * g.o + o0, g.o);
      } else {  // a partial tile: computed whole into scratch, the valid part copied out
        tile(gathered.data(), wg, init, packed.blocks, partial, kGroup);
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(y + (p + r) * g.o + o0, partial + r * kGroup, static_cast<size_t>(width) * sizeof(float));
      }
    }
  }
}

}  // namespace

bool direct_conv_supported() { return has_avx512f(); }

bool direct_conv_applies(const DirectConvGeometry& g) {
  return direct_conv_supported() && g.kh == 1 && g.kw == 1 && g.pad_h == 0 && g.pad_w == 0;
}

// The rule tools/bench/conv measured: on strided 1x1 layers this kernel beat oneDNN's blocked
// kernel, which beat its channels-last one; on 3x3 stride-2 layers oneDNN's channels-last kernel
// beat this one, so they stay on oneDNN (figures: docs/BENCHMARKS.md, notes moved from code comments).
bool direct_conv_preferred(const DirectConvGeometry& g) {
  const bool strided = g.stride_h > 1 || g.stride_w > 1;
  const bool filled = g.c % 16 == 0 && g.o % kGroup == 0;
  return direct_conv_applies(g) && strided && filled;
}

void direct_conv_forward(const DirectConvGeometry& g, const float* x, const float* weight, const float* bias,
                         float* y) {
  const Packed packed = pack(g, weight, bias);
  const int64_t pixels = g.n * g.out_h() * g.out_w();
  const int64_t tiles = (pixels + kRows - 1) / kRows;
  // A chunk of tiles is worth a thread once it holds ~64K multiply-adds.
  const int64_t per_tile = kRows * packed.blocks * 16 * g.o;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, per_tile));
  parallel_for(0, tiles, grain,
               [&](int64_t lo, int64_t hi) { run_pixels(g, packed, x, y, lo * kRows, std::min(pixels, hi * kRows)); });
}

}  // namespace ember::cpu
