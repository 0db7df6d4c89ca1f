// The Winograd F(2x2, 3x3) kernels of winograd_avx2.h, on the formulas of winograd_f2.h.
#include "core/cpu/conv/winograd_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/cpu/avx2_tile.h"
#include "core/cpu/conv/winograd_f2.h"
#include "core/cpu/thread_pool.h"

namespace ember::cpu {

namespace {

using winograd_f2::Plan;

// Every filter transformed, as U[point][out chunk][in][lanes]: each chunk of output channels that
// one register tile reads is one contiguous [in][lanes] panel. `turned`: the filters seen by the
// backward-data pass, g'[c][o](i, j) = g[o][c](2 - i, 2 - j), from the forward's [O][C][3][3].
void transform_weights(const Plan& p, const float* weight, bool turned, float* u) {
  const int64_t in = p.in, out = p.out;
  std::vector<int64_t> chunks;  // where each chunk of output channels starts
  for (int64_t o0 = 0; o0 < out; o0 += avx2::lanes_for(out - o0)) chunks.push_back(o0);
  parallel_for(0, static_cast<int64_t>(chunks.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t chunk = lo; chunk < hi; ++chunk) {
      const int64_t o0 = chunks[chunk], lanes = avx2::lanes_for(out - o0);
      for (int64_t o = o0; o < o0 + lanes; ++o)
        for (int64_t c = 0; c < in; ++c) {
          const float* taps = weight + (turned ? c * out + o : o * in + c) * 9;
          float g[3][3], r[16];
          for (int t = 0; t < 9; ++t) g[t / 3][t % 3] = taps[turned ? 8 - t : t];
          winograd_f2::transform_filter(g, r);
          for (int point = 0; point < 16; ++point) u[(point * out + o0) * in + c * lanes + (o - o0)] = r[point];
        }
    }
  });
}

// B^T d B of tiles [first, first + count), 8 channels at a time, into v[point][tile][in].
__attribute__((target("avx2,fma"))) void transform_inputs(const Plan& p, const float* x, int64_t first, int64_t count,
                                                          float* v) {
  const int64_t in = p.in;
  for (int64_t b = 0; b < count; ++b) {
    const float* pixel[4][4];
    p.tile_pixels(x, first + b, pixel);
    for (int64_t c = 0; c < in; c += 8) {
      __m256 d[4][4];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) d[i][j] = pixel[i][j] ? _mm256_loadu_ps(pixel[i][j] + c) : _mm256_setzero_ps();
      __m256 r[4][4];
      winograd_f2::input_tile(d, r);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) _mm256_storeu_ps(v + ((i * 4 + j) * count + b) * in + c, r[i][j]);
    }
  }
}

// A^T m A (+ bias) of the tiles' products m[point][tile][out], into y's pixels inside the output.
__attribute__((target("avx2,fma"))) void transform_outputs(const Plan& p, const float* m, const float* bias,
                                                           int64_t first, int64_t count, float* y) {
  const int64_t out = p.out, ow = p.ow();
  for (int64_t b = 0; b < count; ++b) {
    const auto [offset, two_rows, two_cols] = p.output_tile(first + b);
    float* y0 = y + offset;
    for (int64_t o = 0; o < out; o += 8) {
      __m256 mt[4][4], r[2][2];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) mt[i][j] = _mm256_loadu_ps(m + ((i * 4 + j) * count + b) * out + o);
      winograd_f2::output_tile(mt, r);
      const __m256 base = bias ? _mm256_loadu_ps(bias + o) : _mm256_setzero_ps();
      for (int i = 0; i < (two_rows ? 2 : 1); ++i) {
        float* yi = y0 + i * ow * out + o;
        _mm256_storeu_ps(yi, _mm256_add_ps(base, r[i][0]));
        if (two_cols) _mm256_storeu_ps(yi + out, _mm256_add_ps(base, r[i][1]));
      }
    }
  }
}

// Tiles per block: the block's transformed inputs and products (16 x tiles x (in + out) floats)
// stay near 1 MiB or below, so that they are still in L2 when the GEMMs and the output transform
// read them back; at least 24, so that each weight panel serves several register tiles.
int64_t block_tiles(const Plan& p) {
  const int64_t fit = (1 << 18) / (16 * (p.in + p.out));
  return std::clamp<int64_t>(fit / 6 * 6, 24, 96);
}

void run(const Plan& p, const float* x, const float* u, const float* bias, float* y) {
  const int64_t tiles = p.n * p.tiles_h() * p.tiles_w(), per_block = block_tiles(p);
  const int64_t blocks = (tiles + per_block - 1) / per_block, in = p.in, out = p.out;
  parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
    const std::unique_ptr<float[]> v(new float[16 * per_block * in]), m(new float[16 * per_block * out]);
    for (int64_t block = lo; block < hi; ++block) {
      const int64_t first = block * per_block, count = std::min(per_block, tiles - first);
      transform_inputs(p, x, first, count, v.get());
      const avx2::TileSplit split(count);
      for (int point = 0; point < 16; ++point) {
        const float* vp = v.get() + point * count * in;
        float* mp = m.get() + point * count * out;
        for (int64_t o0 = 0; o0 < out; o0 += avx2::lanes_for(out - o0)) {
          const int lanes = avx2::lanes_for(out - o0);
          const float* panel = u + (point * out + o0) * in;
          const avx2::Walk walk{1, in, 0, 0, 1, lanes, in};
          const std::vector<int64_t>& starts = split.starts(lanes);
          for (size_t k = 0; k + 1 < starts.size(); ++k) {
            const int rows = static_cast<int>(starts[k + 1] - starts[k]);
            avx2::tile(rows, lanes)(walk, vp + starts[k] * in, panel, mp + starts[k] * out + o0, out, false);
          }
        }
      }
      transform_outputs(p, m.get(), bias, first, count, y);
    }
  });
}

}  // namespace

bool winograd_avx2_applies(const DirectConvGeometry& g) {
  return avx2::supported() && g.kh == 3 && g.kw == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 &&
         g.dilation_w == 1 && g.pad_h >= 0 && g.pad_h <= 2 && g.pad_w >= 0 && g.pad_w <= 2 && g.c % 8 == 0 &&
         g.o % 8 == 0 && g.c > 0 && g.o > 0 && g.n > 0 && g.out_h() > 0 && g.out_w() > 0;
}

void winograd_avx2_forward(const DirectConvGeometry& g, const float* x, const float* weight, const float* bias,
                           float* y) {
  const Plan p{g.n, g.c, g.h, g.w, g.o, g.pad_h, g.pad_w};
  const std::unique_ptr<float[]> u(new float[16 * g.c * g.o]);
  transform_weights(p, weight, false, u.get());
  run(p, x, u.get(), bias, y);
}

void winograd_avx2_backward_data(const DirectConvGeometry& g, const float* dy, const float* weight, float* dx) {
  const Plan p{g.n, g.o, g.out_h(), g.out_w(), g.c, 2 - g.pad_h, 2 - g.pad_w};
  const std::unique_ptr<float[]> u(new float[16 * g.c * g.o]);
  transform_weights(p, weight, true, u.get());
  run(p, dy, u.get(), nullptr, dx);
}

}  // namespace ember::cpu
