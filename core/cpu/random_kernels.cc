// CPU random fills: element i takes Philox(seed, offset + i), so any split across threads
// produces the same values.
#include <cmath>
#include <limits>

#include "core/cpu/kernels.h"
#include "core/cpu/thread_pool.h"
#include "core/random.h"

namespace ember::cpu {

namespace {

template <typename T>
void random_typed(RandomKind kind, T* out, int64_t numel, PhiloxState state, double a, double b) {
  parallel_for(0, numel, 4096, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      out[i] = random_element<T>(kind, state.seed, state.offset + static_cast<uint64_t>(i), a, b);
  });
}

}  // namespace

void random_kernel(RandomKind kind, Device /*cpu*/, void* data, DType dtype, int64_t numel, PhiloxState state, double a,
                   double b) {
  EMBER_DISPATCH_ALL(dtype, "random",
                     [&] { random_typed<scalar_t>(kind, static_cast<scalar_t*>(data), numel, state, a, b); });
}

}  // namespace ember::cpu
