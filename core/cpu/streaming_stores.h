// Stores that go around the cache (streaming, non-temporal), for outputs too large to stay cached
// until their reader comes: they save the read of every output line that an ordinary store makes
// first, a quarter of the memory traffic of c = a + b.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace ember::cpu {

// The last-level cache this core shares: sysfs's index3 (per core complex on AMD), where sysconf
// reports the whole socket's; 32 MB if neither says.
size_t last_level_cache_bytes();

// Whether an elementwise output of `bytes` should be streamed: twice the last-level cache, so that
// outputs which could stay cached for the next op (ResNet-20's 8 MB activations) keep doing so.
bool streaming_output_preferred(int64_t bytes);

// Copies `bytes` from `src` (typically a small buffer in L1) to `dst` with streaming stores, any
// alignment (the unaligned ends are stored normally).
void stream_copy(void* dst, const void* src, int64_t bytes);

// Orders this thread's streaming stores before whatever another thread reads next; each thread
// that streamed calls it before its work is handed on.
void stream_fence();

// out[i] = value(i) for i < n. With `streaming`, computed a block at a time into L1 and streamed
// out from there, fenced at the end; a row shorter than a block (a broadcast's short inner rows)
// is stored normally all the same, since streaming stores that fill only part of a line each cost
// a memory transaction.
template <typename T, typename Value>
void write_elements(T* out, int64_t n, Value value, bool streaming) {
  // `value` is taken by copy: through a reference, its captures (a broadcast scalar among them)
  // may alias `out` as far as the compiler knows, and x * scalar on 1M floats ran 10-30% slower.
  constexpr int64_t kBlock = 4096 / sizeof(T);
  if (!streaming || n < kBlock) {
    for (int64_t i = 0; i < n; ++i) out[i] = value(i);
    return;
  }
  alignas(64) T block[kBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t m = std::min(kBlock, n - i0);
    for (int64_t i = 0; i < m; ++i) block[i] = value(i0 + i);
    stream_copy(out + i0, block, m * static_cast<int64_t>(sizeof(T)));
  }
  stream_fence();
}

}  // namespace ember::cpu
