// The vector loops of kernels.h, compiled once per instruction set: vec.inc's `Vec` and the loops
// written on it are included inside a `#pragma GCC target` region and a namespace of that set's
// own (avx512, avx2), so nothing compiled for one set is shared with code that runs without it.
// Only what this file defines sits in those regions: the headers it uses are included before.
#include "core/cpu/simd/kernels.h"

#include <immintrin.h>

#include "core/cpu/isa.h"

// GCC 12 warns inside its own AVX-512 intrinsics (their _mm512_undefined_* operands) wherever
// they are inlined: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
namespace ember::cpu::simd::avx512 {
#define EMBER_SIMD_AVX512 1
#include "core/cpu/simd/vec.inc"
// clang-format off
#include "core/cpu/simd/convert.inc"
#include "core/cpu/simd/batch_norm.inc"
// clang-format on
#undef EMBER_SIMD_AVX512
}  // namespace ember::cpu::simd::avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace ember::cpu::simd::avx2 {
#define EMBER_SIMD_AVX512 0
#include "core/cpu/simd/vec.inc"
// clang-format off
#include "core/cpu/simd/convert.inc"
#include "core/cpu/simd/batch_norm.inc"
// clang-format on
#undef EMBER_SIMD_AVX512
}  // namespace ember::cpu::simd::avx2
#pragma GCC pop_options

namespace ember::cpu::simd {

namespace {

enum class Level { None, Avx2, Avx512 };

Level level() {
  static const Level chosen = has_avx512_core() ? Level::Avx512 : has_avx2_fma() ? Level::Avx2 : Level::None;
  return chosen;
}

#define EMBER_BATCH_NORM_LOOPS(ns)                                                     \
  BatchNormLoops {                                                                     \
    ns::stats_rows<BFloat16>, ns::stats_plane<BFloat16>,                               \
        {ns::apply_rows<BFloat16, false>, ns::apply_rows<BFloat16, true>},             \
        {ns::apply_plane<BFloat16, false>, ns::apply_plane<BFloat16, true>},           \
        {ns::grad_sums_rows<BFloat16, false>, ns::grad_sums_rows<BFloat16, true>},     \
        {ns::grad_sums_plane<BFloat16, false>, ns::grad_sums_plane<BFloat16, true>},   \
        {ns::input_grad_rows<BFloat16, false>, ns::input_grad_rows<BFloat16, true>},   \
        {ns::input_grad_plane<BFloat16, false>, ns::input_grad_plane<BFloat16, true>}, \
  }

}  // namespace

bool available() { return level() != Level::None; }

void to_float(const BFloat16* in, float* out, int64_t n) {
  switch (level()) {
    case Level::Avx512:
      return avx512::to_float(in, out, n);
    case Level::Avx2:
      return avx2::to_float(in, out, n);
    case Level::None:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
  }
}

void from_float(const float* in, BFloat16* out, int64_t n) {
  switch (level()) {
    case Level::Avx512:
      return avx512::from_float(in, out, n);
    case Level::Avx2:
      return avx2::from_float(in, out, n);
    case Level::None:
      for (int64_t i = 0; i < n; ++i) out[i] = BFloat16(in[i]);
  }
}

const BatchNormLoops& batch_norm_loops() {
  static const BatchNormLoops avx512_loops = EMBER_BATCH_NORM_LOOPS(avx512);
  static const BatchNormLoops avx2_loops = EMBER_BATCH_NORM_LOOPS(avx2);
  return level() == Level::Avx512 ? avx512_loops : avx2_loops;
}

}  // namespace ember::cpu::simd
