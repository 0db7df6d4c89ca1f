// Vector loops over bf16 memory that compute in float32 lanes: the casts, and batch norm's inner
// loops (the entries in core/cpu/batch_norm_kernels.cc split the work between threads). Each runs
// on AVX-512 (F/BW/VL/DQ) or AVX2 + FMA, whichever the CPU has within EMBER_CPU_ISA's cap, chosen
// at run time; the default build stays portable. bf16 results round to nearest even, exactly as
// BFloat16::from_float (core/half.h).
//
//   if (simd::available()) simd::batch_norm_loops().apply_rows[relu](x, y, rows, channels, scale, shift);
#pragma once

#include <cstdint>

#include "core/half.h"

namespace ember::cpu::simd {

// Whether the vector loops run here (AVX2 + FMA at least, within the cap).
bool available();

// n elements; the scalar conversion where !available().
void to_float(const BFloat16* in, float* out, int64_t n);
void from_float(const float* in, BFloat16* out, int64_t n);

// Batch norm's loops over bf16 activations with float32 per-channel values (simd/batch_norm.inc
// documents each). `rows`: a channels-last [rows, channels] block, per-channel arrays of
// `channels` floats, scratch of 2 * channels floats. `plane`: one channel's contiguous run of n,
// with that channel's scalars. Sums are added to the float64 totals given. Index [relu] or [mask]:
// with the fused ReLU (apply), or dy masked where the fused forward's output was not > 0.
struct BatchNormLoops {
  void (*stats_rows)(const BFloat16* x, int64_t rows, int64_t channels, const float* shift, float* scratch, double* sum,
                     double* sum_sq);
  void (*stats_plane)(const BFloat16* x, int64_t n, float shift, double* sum, double* sum_sq);
  void (*apply_rows[2])(const BFloat16* x, BFloat16* y, int64_t rows, int64_t channels, const float* scale,
                        const float* shift);
  void (*apply_plane[2])(const BFloat16* x, BFloat16* y, int64_t n, float scale, float shift);
  void (*grad_sums_rows[2])(const BFloat16* dy, const BFloat16* y, const BFloat16* x, int64_t rows, int64_t channels,
                            const float* mean, float* scratch, double* sum_dy, double* sum_dy_xmu);
  void (*grad_sums_plane[2])(const BFloat16* dy, const BFloat16* y, const BFloat16* x, int64_t n, float mean,
                             double* sum_dy, double* sum_dy_xmu);
  void (*input_grad_rows[2])(const BFloat16* dy, const BFloat16* y, const BFloat16* x, BFloat16* dx, int64_t rows,
                             int64_t channels, const float* k, const float* a, const float* b);
  void (*input_grad_plane[2])(const BFloat16* dy, const BFloat16* y, const BFloat16* x, BFloat16* dx, int64_t n,
                              float k, float a, float b);
};

// The loops of the instruction set chosen; only where available().
const BatchNormLoops& batch_norm_loops();

}  // namespace ember::cpu::simd
