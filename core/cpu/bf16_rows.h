// Contiguous bf16 rows of an elementwise kernel computed in float32 a block at a time: each input
// block widened into L1 by the vector casts (core/cpu/simd), the float32 loop that float32 tensors
// get run on it (the compiler vectorises it), the result rounded back to bf16. One pass over
// memory, where converting whole tensors first would take three.
//
//   bf16_rows<2>(out, n, {a, b}, {false, true},   // b is a broadcast scalar
//                [](float* r, const float* const* x, int64_t m) { for (...) r[i] = x[0][i] + x[1][i]; });
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/cpu/simd/kernels.h"
#include "core/half.h"

namespace ember::cpu {

constexpr int64_t kBf16Block = 512;

// out[i] for i < n from K inputs, each a contiguous row or (broadcast) one value; `block(result,
// inputs, m)` computes m <= kBf16Block results from the widened inputs. An input that is the same
// row as an earlier one is widened once.
template <int K, typename Block>
void bf16_rows(BFloat16* out, int64_t n, const std::array<const BFloat16*, K>& in, const std::array<bool, K>& broadcast,
               const Block& block) {
  alignas(64) float inputs[K][kBf16Block];
  alignas(64) float result[kBf16Block];
  const float* rows[K];
  bool widen[K];
  for (int k = 0; k < K; ++k) {
    rows[k] = inputs[k];
    widen[k] = !broadcast[k];
    for (int j = 0; j < k; ++j)
      if (in[j] == in[k] && broadcast[j] == broadcast[k]) rows[k] = rows[j], widen[k] = false;
    if (broadcast[k] && rows[k] == inputs[k])
      std::fill_n(inputs[k], std::min(n, kBf16Block), static_cast<float>(*in[k]));
  }
  for (int64_t i0 = 0; i0 < n; i0 += kBf16Block) {
    const int64_t m = std::min(kBf16Block, n - i0);
    for (int k = 0; k < K; ++k)
      if (widen[k]) simd::to_float(in[k] + i0, inputs[k], m);
    block(result, rows, m);
    simd::from_float(result, out + i0, m);
  }
}

}  // namespace ember::cpu
