// The Winograd F(2x2, 3x3) formulas that Ember's float32 (winograd_avx2.h) and bf16
// (winograd_bf16.h) kernels share. With B, G and A the F(2, 3) matrices (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks"), an output tile is A^T [(G g G^T) . (B^T d B)] A
// for each 4x4 input tile d, summed over input channels. The tile transforms are templates over a
// vector of channels (GCC's vector types take + and -), so each kernel keeps only its loads and
// stores.
#pragma once

#include <cstdint>

namespace ember::cpu::winograd_f2 {

// One convolution as the kernels run it: stride 1, 3x3, `in` channels to `out` channels. The
// backward-data pass is such a convolution too, of dy with the filters turned, with padding
// 2 - pad.
struct Plan {
  int64_t n, in, h, w, out, pad_h, pad_w;
  int64_t oh() const { return h + 2 * pad_h - 2; }
  int64_t ow() const { return w + 2 * pad_w - 2; }
  int64_t tiles_h() const { return (oh() + 1) / 2; }
  int64_t tiles_w() const { return (ow() + 1) / 2; }
  int64_t tiles() const { return n * tiles_h() * tiles_w(); }

  // The 16 input pixels of tile t (tiles numbered image by image, row by row) in x's dense
  // [N][H][W][in] channels-last memory, null where the tile reaches into the padding.
  template <class T>
  void tile_pixels(const T* x, int64_t t, const T* (&pixel)[4][4]) const {
    const int64_t img = t / (tiles_h() * tiles_w()), row = t / tiles_w() % tiles_h(), col = t % tiles_w();
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        const int64_t ih = 2 * row - pad_h + i, iw = 2 * col - pad_w + j;
        const bool inside = ih >= 0 && ih < h && iw >= 0 && iw < w;
        pixel[i][j] = inside ? x + ((img * h + ih) * w + iw) * in : nullptr;
      }
  }

  // Where tile t's outputs go in dense [N][OH][OW][out] memory: its top-left pixel, and whether
  // its second row and column lie inside the output (an odd size leaves them out).
  struct OutputTile {
    int64_t offset;
    bool two_rows, two_cols;
  };
  OutputTile output_tile(int64_t t) const {
    const int64_t img = t / (tiles_h() * tiles_w()), row = t / tiles_w() % tiles_h(), col = t % tiles_w();
    return {((img * oh() + 2 * row) * ow() + 2 * col) * out, 2 * row + 1 < oh(), 2 * col + 1 < ow()};
  }
};

// Always inlined, so that at any optimisation level they compile for their caller's instruction set
// (a vector kernel's target attribute) and take no vectors by value across calls.
#define EMBER_WINOGRAD_INLINE inline __attribute__((always_inline))

// G g G^T of one 3x3 filter g (floats, or vectors of several filters' taps), as 16 values in
// point order.
template <class V>
EMBER_WINOGRAD_INLINE void transform_filter(const V (&g)[3][3], V* r) {
  V t[4][3];
  for (int j = 0; j < 3; ++j) {
    const V g0 = g[0][j], g1 = g[1][j], g2 = g[2][j];
    t[0][j] = g0, t[1][j] = 0.5f * (g0 + g1 + g2), t[2][j] = 0.5f * (g0 - g1 + g2), t[3][j] = g2;
  }
  for (int i = 0; i < 4; ++i) {
    r[i * 4 + 0] = t[i][0];
    r[i * 4 + 1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
    r[i * 4 + 2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
    r[i * 4 + 3] = t[i][2];
  }
}

// B^T d B of one 4x4 tile of channel vectors: r[i][j] is point i * 4 + j.
template <class V>
EMBER_WINOGRAD_INLINE void input_tile(const V (&d)[4][4], V (&r)[4][4]) {
  V t[4][4];
  for (int j = 0; j < 4; ++j) {
    t[0][j] = d[0][j] - d[2][j];
    t[1][j] = d[1][j] + d[2][j];
    t[2][j] = d[2][j] - d[1][j];
    t[3][j] = d[1][j] - d[3][j];
  }
  for (int i = 0; i < 4; ++i) {
    r[i][0] = t[i][0] - t[i][2];
    r[i][1] = t[i][1] + t[i][2];
    r[i][2] = t[i][2] - t[i][1];
    r[i][3] = t[i][1] - t[i][3];
  }
}

// A^T m A of one tile's 16 products (m[i][j]: point i * 4 + j): the 2x2 output pixels.
template <class V>
EMBER_WINOGRAD_INLINE void output_tile(const V (&m)[4][4], V (&y)[2][2]) {
  V s[2][4];
  for (int j = 0; j < 4; ++j) {
    s[0][j] = m[0][j] + m[1][j] + m[2][j];
    s[1][j] = m[1][j] - m[2][j] - m[3][j];
  }
  for (int i = 0; i < 2; ++i) {
    y[i][0] = s[i][0] + s[i][1] + s[i][2];
    y[i][1] = s[i][1] - s[i][2] - s[i][3];
  }
}

}  // namespace ember::cpu::winograd_f2
