// The kernels of winograd_bf16.h. Per block of tiles (small enough that its transformed inputs
// and products stay in L2 for the GEMMs and the output transform): the input transform into bf16
// V[point][tile][channel], 16 GEMMs against the transformed filters U on register tiles of up to
// 6 tiles x 64 output channels (24 vdpbf16ps sums), and the output transform from float32 sums.
#include "core/cpu/conv/winograd_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/cpu/conv/winograd_f2.h"
#include "core/cpu/dnnl/runtime.h"
#include "core/cpu/isa.h"
#include "core/cpu/thread_pool.h"
#include "core/factory.h"
#include "core/half.h"

#define EMBER_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace ember::cpu {

namespace {

using winograd_f2::Plan;

constexpr int kMaxRows = 6;     // tiles per register tile
constexpr int kMaxVectors = 4;  // 16-lane vectors of output channels per register tile

// The GEMMs' sizes: vdpbf16ps multiplies channel pairs (an odd channel count gets a zero partner),
// and output channels are padded to whole vectors.
struct Dims {
  int64_t pairs, channels, out_padded;
  explicit Dims(const Plan& p) : pairs((p.in + 1) / 2), channels(2 * pairs), out_padded((p.out + 15) / 16 * 16) {}
  // Vectors of the register tiles (and of U's panel) whose output channels start at o0.
  int vectors_at(int64_t o0) const { return static_cast<int>(std::min<int64_t>(kMaxVectors, (out_padded - o0) / 16)); }
  int64_t point_stride() const { return pairs * 2 * out_padded; }  // U's values per point
};

EMBER_BF16_TARGET EMBER_WINOGRAD_INLINE __m512 widen(__m256i bf16) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16), 16));
}

EMBER_BF16_TARGET EMBER_WINOGRAD_INLINE __m256i narrow(__m512 values) { return (__m256i)_mm512_cvtneps_pbh(values); }

EMBER_BF16_TARGET EMBER_WINOGRAD_INLINE __mmask16 first_lanes(int64_t count) {
  return static_cast<__mmask16>((1u << std::clamp<int64_t>(count, 0, 16)) - 1u);
}

// Every filter transformed and rounded to bf16, as U[point][panel][pair][lane][2]: the panel of
// output channels [o0, o0 + 16 * vectors_at(o0)) starts o0 * 2 * pairs values into its point, and
// holds, per channel pair, the pair's two values for each lane side by side (vdpbf16ps's order).
// `turned`: the filters the backward-data pass sees, g'[c][o](i, j) = g[o][c](2 - i, 2 - j), from
// the forward's [O][C][3][3]. Padding lanes and partners are zero. 16 filters at a time on vector
// lanes, so that each point's values leave as whole vectors (one value at a time, the stores
// scattered over 16 points took half the time of a 512-channel convolution).
EMBER_BF16_TARGET void transform_weight_vector(const Plan& p, const Dims& d, const BFloat16* weight, bool turned,
                                               int64_t vector, uint16_t* u) {
  const int64_t first = vector * 16, o0 = first / (16 * kMaxVectors) * (16 * kMaxVectors);
  const int64_t lanes = 16 * d.vectors_at(o0);
  alignas(64) float taps[9][16];
  for (int64_t k = 0; k < d.pairs; ++k) {
    __m512 r[2][16];
    for (int half = 0; half < 2; ++half) {
      const int64_t c = 2 * k + half;
      for (int lane = 0; lane < 16; ++lane) {
        const int64_t o = first + lane;
        const bool real = o < p.out && c < p.in;
        const BFloat16* g = weight + (turned ? c * p.out + o : o * p.in + c) * 9;
        for (int t = 0; t < 9; ++t) taps[t][lane] = real ? static_cast<float>(g[turned ? 8 - t : t]) : 0.0f;
      }
      __m512 g[3][3];
      for (int t = 0; t < 9; ++t) g[t / 3][t % 3] = _mm512_load_ps(taps[t]);
      winograd_f2::transform_filter(g, r[half]);
    }
    uint16_t* at = u + o0 * 2 * d.pairs + (k * lanes + (first - o0)) * 2;
    for (int point = 0; point < 16; ++point) {
      const __m512i even = _mm512_cvtepu16_epi32(narrow(r[0][point]));
      const __m512i odd = _mm512_slli_epi32(_mm512_cvtepu16_epi32(narrow(r[1][point])), 16);
      _mm512_storeu_si512(at + point * d.point_stride(), _mm512_or_si512(even, odd));
    }
  }
}

void transform_weights(const Plan& p, const Dims& d, const BFloat16* weight, bool turned, uint16_t* u) {
  parallel_for(0, d.out_padded / 16, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t vector = lo; vector < hi; ++vector) transform_weight_vector(p, d, weight, turned, vector, u);
  });
}

// B^T d B of tiles [first, first + count), 16 channels at a time, rounded into v[point][tile][channel].
EMBER_BF16_TARGET void transform_inputs(const Plan& p, const Dims& d, const uint16_t* x, int64_t first, int64_t count,
                                        uint16_t* v) {
  for (int64_t b = 0; b < count; ++b) {
    const uint16_t* pixel[4][4];
    p.tile_pixels(x, first + b, pixel);
    for (int64_t c = 0; c < d.channels; c += 16) {
      const __mmask16 load = first_lanes(p.in - c), store = first_lanes(d.channels - c);
      __m512 dt[4][4], r[4][4];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          dt[i][j] = pixel[i][j] ? widen(_mm256_maskz_loadu_epi16(load, pixel[i][j] + c)) : _mm512_setzero_ps();
      winograd_f2::input_tile(dt, r);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          _mm256_mask_storeu_epi16(v + ((i * 4 + j) * count + b) * d.channels + c, store, narrow(r[i][j]));
    }
  }
}

// c[r][lane] = sum over pairs k of a[r][2k] * b[k][lane][0] + a[r][2k + 1] * b[k][lane][1], for
// R rows (a_stride values apart in a, c_stride floats apart in c) and 16 * J lanes.
template <int R, int J>
EMBER_BF16_TARGET void dot_tile(int64_t pairs, const uint16_t* a, int64_t a_stride, const uint16_t* b, float* c,
                                int64_t c_stride) {
  __m512 sum[R][J];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) sum[r][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < pairs; ++k) {
    __m512bh bk[J];
    for (int j = 0; j < J; ++j) bk[j] = (__m512bh)_mm512_loadu_si512(b + (k * J + j) * 32);
    for (int r = 0; r < R; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * a_stride + 2 * k, sizeof pair);
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(pair);
      for (int j = 0; j < J; ++j) sum[r][j] = _mm512_dpbf16_ps(sum[r][j], ar, bk[j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) _mm512_storeu_ps(c + r * c_stride + j * 16, sum[r][j]);
}

using DotTile = void (*)(int64_t, const uint16_t*, int64_t, const uint16_t*, float*, int64_t);

template <int R>
constexpr DotTile kRowTiles[kMaxVectors] = {dot_tile<R, 1>, dot_tile<R, 2>, dot_tile<R, 3>, dot_tile<R, 4>};

const DotTile* const kTiles[kMaxRows] = {kRowTiles<1>, kRowTiles<2>, kRowTiles<3>,
                                         kRowTiles<4>, kRowTiles<5>, kRowTiles<6>};

// A^T m A (+ bias) of the tiles' products m[point][tile][out_padded], rounded into y's pixels
// inside the output.
EMBER_BF16_TARGET void transform_outputs(const Plan& p, const Dims& d, const float* m, const float* bias, int64_t first,
                                         int64_t count, uint16_t* y) {
  const int64_t out = p.out, ow = p.ow();
  for (int64_t b = 0; b < count; ++b) {
    const auto [offset, two_rows, two_cols] = p.output_tile(first + b);
    uint16_t* y0 = y + offset;
    for (int64_t o = 0; o < out; o += 16) {
      const __mmask16 lanes = first_lanes(out - o);
      __m512 mt[4][4], r[2][2];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) mt[i][j] = _mm512_loadu_ps(m + ((i * 4 + j) * count + b) * d.out_padded + o);
      winograd_f2::output_tile(mt, r);
      const __m512 base = bias ? _mm512_maskz_loadu_ps(lanes, bias + o) : _mm512_setzero_ps();
      for (int i = 0; i < (two_rows ? 2 : 1); ++i) {
        uint16_t* yi = y0 + i * ow * out + o;
        _mm256_mask_storeu_epi16(yi, lanes, narrow(_mm512_add_ps(base, r[i][0])));
        if (two_cols) _mm256_mask_storeu_epi16(yi + out, lanes, narrow(_mm512_add_ps(base, r[i][1])));
      }
    }
  }
}

// Tiles per block: the block's transformed inputs and products near 768 KiB (L2 is 1-2 MiB on
// CPUs with AVX512_BF16), and enough blocks that every thread has some.
int64_t block_tiles(const Plan& p, const Dims& d) {
  const int64_t bytes_per_tile = 16 * (d.channels * 2 + d.out_padded * 4);
  const int64_t fit = std::clamp<int64_t>((768 << 10) / bytes_per_tile, 12, 96);
  const int64_t share = (p.tiles() + num_threads() - 1) / num_threads();
  return std::max<int64_t>(1, std::min(fit, share));
}

const uint16_t* bits(const Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<BFloat16>()); }
uint16_t* bits(Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<BFloat16>()); }

void run(const Plan& p, const uint16_t* x, const BFloat16* weight, bool turned, const float* bias, uint16_t* y) {
  const Dims d(p);
  // Scratch from Ember's allocator, which keeps large blocks: fresh ones cost a page fault per page.
  Tensor u_buffer = empty({16 * d.point_stride()}, kBFloat16);
  uint16_t* u = bits(u_buffer);
  transform_weights(p, d, weight, turned, u);
  const int64_t tiles = p.tiles(), per_block = block_tiles(p, d), blocks = (tiles + per_block - 1) / per_block;
  parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
    Tensor v_buffer = empty({16 * per_block * d.channels}, kBFloat16);
    Tensor m_buffer = empty({16 * per_block * d.out_padded}, kFloat32);
    uint16_t* v = bits(v_buffer);
    float* m = m_buffer.data_ptr<float>();
    for (int64_t block = lo; block < hi; ++block) {
      const int64_t first = block * per_block, count = std::min(per_block, tiles - first);
      transform_inputs(p, d, x, first, count, v);
      // Row tiles as even as possible: a last tile of 1-2 rows would leave too few sums in flight.
      const int64_t row_tiles = (count + kMaxRows - 1) / kMaxRows;
      for (int point = 0; point < 16; ++point) {
        const uint16_t* vp = v + point * count * d.channels;
        float* mp = m + point * count * d.out_padded;
        for (int64_t o0 = 0; o0 < d.out_padded; o0 += 16 * d.vectors_at(o0)) {
          const int vectors = d.vectors_at(o0);
          const uint16_t* panel = u + point * d.point_stride() + o0 * 2 * d.pairs;
          for (int64_t k = 0; k < row_tiles; ++k) {
            const int64_t start = k * count / row_tiles, end = (k + 1) * count / row_tiles;
            kTiles[end - start - 1][vectors - 1](d.pairs, vp + start * d.channels, d.channels, panel,
                                                 mp + start * d.out_padded + o0, d.out_padded);
          }
        }
      }
      transform_outputs(p, d, m, bias, first, count, y);
    }
  });
}

}  // namespace

bool winograd_bf16_applies(const ConvProblem& pr) {
  const ConvSizes& g = pr.g;
  const ConvParams& p = pr.p;
  const bool pass = pr.pass == ConvPass::Forward || pr.pass == ConvPass::BackwardData;
  return pass && pr.dtype == kBFloat16 && p.groups == 1 && g.kh == 3 && g.kw == 3 && p.stride_h == 1 &&
         p.stride_w == 1 && p.dilation_h == 1 && p.dilation_w == 1 && p.pad_h >= 0 && p.pad_h <= 2 && p.pad_w >= 0 &&
         p.pad_w <= 2 && g.n > 0 && g.c > 0 && g.o > 0 && g.h > 0 && g.w > 0 && g.oh > 0 && g.ow > 0 &&
         has_native_bf16();
}

Tensor winograd_bf16_forward(const ConvProblem& pr, const Tensor& input, const Tensor& weight, const Tensor& bias) {
  const ConvSizes& g = pr.g;
  const Plan plan{g.n, g.c, g.h, g.w, g.o, pr.p.pad_h, pr.p.pad_w};
  const Tensor x = onednn::to_channels_last(input), w = weight.contiguous();
  const Tensor b = bias.defined() ? bias.to(kFloat32).contiguous() : Tensor();
  Tensor y = empty_channels_last({g.n, g.o, g.oh, g.ow}, input.options());
  run(plan, bits(x), w.data_ptr<BFloat16>(), false, b.defined() ? b.data_ptr<float>() : nullptr, bits(y));
  return y;
}

Tensor winograd_bf16_backward_data(const ConvProblem& pr, const Tensor& grad_output, const Tensor& weight,
                                   const Shape& input_shape) {
  const ConvSizes& g = pr.g;
  const Plan plan{g.n, g.o, g.oh, g.ow, g.c, 2 - pr.p.pad_h, 2 - pr.p.pad_w};
  const Tensor dy = onednn::to_channels_last(grad_output), w = weight.contiguous();
  Tensor dx = empty_channels_last(input_shape, grad_output.options());
  run(plan, bits(dy), w.data_ptr<BFloat16>(), true, nullptr, bits(dx));
  return dx;
}

}  // namespace ember::cpu
