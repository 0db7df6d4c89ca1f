// Running a StridedLoop on the CPU: the loop is split by element ranges across the thread pool
// and handed to a row function one innermost row at a time:
//   row(int64_t n, char* const* ptrs, const int64_t* strides)   // strides in bytes
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cpu/streaming_stores.h"
#include "core/cpu/thread_pool.h"
#include "core/loop.h"

namespace ember::cpu {

// Elements per parallel chunk for cheap elementwise work: below this, threads cost more than they save.
constexpr int64_t kElementwiseGrain = 32768;

// Whether the loop's output (operand 0) should be written with streaming stores: a new tensor, not
// one of the inputs updated in place (whose lines the loop reads anyway), much larger than the
// cache (streaming_output_preferred).
inline bool streams_output(const StridedLoop& loop, int64_t element_bytes) {
  for (int k = 1; k < loop.noperands; ++k)
    if (loop.data[k] == loop.data[0]) return false;
  return streaming_output_preferred(loop.numel * element_bytes);
}

template <typename Row>
void for_each_row(const StridedLoop& loop, int64_t grain, const Row& row) {
  if (loop.numel == 0) return;
  const int nops = loop.noperands;
  const int64_t inner = loop.sizes[0];
  parallel_for(0, loop.numel, grain, [&](int64_t lo, int64_t hi) {
    int64_t index[kMaxLoopDims] = {};
    char* ptrs[kMaxLoopOperands];
    int64_t rest = lo;
    for (int d = 0; d < loop.ndim; ++d) {
      index[d] = rest % loop.sizes[d];
      rest /= loop.sizes[d];
    }
    for (int k = 0; k < nops; ++k) {
      ptrs[k] = loop.data[k];
      for (int d = 0; d < loop.ndim; ++d) ptrs[k] += index[d] * loop.strides[k][d];
    }
    int64_t remaining = hi - lo;
    int64_t inner_strides[kMaxLoopOperands];
    for (int k = 0; k < nops; ++k) inner_strides[k] = loop.strides[k][0];
    while (remaining > 0) {
      int64_t n = std::min(inner - index[0], remaining);
      row(n, ptrs, inner_strides);
      remaining -= n;
      if (remaining == 0) break;
      // Advance to the start of the next row, carrying into outer dims.
      for (int k = 0; k < nops; ++k) ptrs[k] -= index[0] * loop.strides[k][0];
      index[0] = 0;
      for (int d = 1; d < loop.ndim; ++d) {
        ++index[d];
        for (int k = 0; k < nops; ++k) ptrs[k] += loop.strides[k][d];
        if (index[d] < loop.sizes[d]) break;
        for (int k = 0; k < nops; ++k) ptrs[k] -= loop.sizes[d] * loop.strides[k][d];
        index[d] = 0;
      }
    }
  });
}

}  // namespace ember::cpu
