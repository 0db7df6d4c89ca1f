// CPU random fills: element i takes Philox(seed, offset + i), so any split across threads
// produces the same values.
#include <cmath>
#include <limits>

#include "core/cpu/kernels.h"
#include "core/cpu/thread_pool.h"
#include "core/random.h"

namespace ember::cpu {

namespace {

// One value for element `i`, computed in double then stored as T.
inline double random_value(RandomKind kind, const PhiloxState& state, int64_t i, double a, double b) {
  auto w = philox4x32(state.seed, state.offset + static_cast<uint64_t>(i));
  switch (kind) {
    case RandomKind::Uniform: return a + (b - a) * uniform_double(w[0], w[1]);
    case RandomKind::Normal: {
      // Box-Muller; 1 - u keeps the log argument in (0, 1].
      double u1 = 1.0 - uniform_double(w[0], w[1]);
      double u2 = uniform_double(w[2], w[3]);
      return a + b * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2);
    }
    case RandomKind::Bernoulli: return uniform_double(w[0], w[1]) < a ? 1.0 : 0.0;
    case RandomKind::RandInt: {
      uint64_t range = static_cast<uint64_t>(static_cast<int64_t>(b) - static_cast<int64_t>(a));
      uint64_t bits = (static_cast<uint64_t>(w[0]) << 32) | w[1];
      return static_cast<double>(static_cast<int64_t>(a) + static_cast<int64_t>(bits % range));
    }
  }
  return 0.0;
}

// The largest T below b. Stepping down in the compute type is not enough for 16-bit floats:
// nextafter(1.0f, 0) rounds straight back to 1 in bfloat16.
template <typename T>
T largest_below(double b) {
  T t = static_cast<T>(static_cast<ComputeType<T>>(b));
  if (static_cast<double>(static_cast<ComputeType<T>>(t)) < b) return t;
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
    // Sign-magnitude bits: one step toward -inf.
    if ((t.bits & 0x7fff) == 0) t.bits = 0x8001;
    else if (t.bits & 0x8000) ++t.bits;
    else --t.bits;
    return t;
  } else {
    return std::nextafter(t, -std::numeric_limits<T>::infinity());
  }
}

template <typename T>
void random_typed(RandomKind kind, T* out, int64_t numel, PhiloxState state, double a, double b) {
  parallel_for(0, numel, 4096, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      double v = random_value(kind, state, i, a, b);
      if constexpr (std::is_same_v<T, bool>) {
        out[i] = v != 0.0;
      } else if constexpr (std::is_floating_point_v<ComputeType<T>>) {
        T t = static_cast<T>(static_cast<ComputeType<T>>(v));
        // Rounding to a narrower float can reach the open upper bound of uniform [a, b).
        if (kind == RandomKind::Uniform && b > a && static_cast<double>(static_cast<ComputeType<T>>(t)) >= b)
          t = largest_below<T>(b);
        out[i] = t;
      } else {
        out[i] = static_cast<T>(v);
      }
    }
  });
}

}  // namespace

void random_kernel(RandomKind kind, Device /*cpu*/, void* data, DType dtype, int64_t numel, PhiloxState state,
                   double a, double b) {
  if (kind == RandomKind::RandInt && dtype == kInt64) {
    // Exact for ranges beyond 2^53, which the double path would round.
    int64_t* out = static_cast<int64_t*>(data);
    uint64_t range = static_cast<uint64_t>(static_cast<int64_t>(b) - static_cast<int64_t>(a));
    parallel_for(0, numel, 4096, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        auto w = philox4x32(state.seed, state.offset + static_cast<uint64_t>(i));
        uint64_t bits = (static_cast<uint64_t>(w[0]) << 32) | w[1];
        out[i] = static_cast<int64_t>(a) + static_cast<int64_t>(bits % range);
      }
    });
    return;
  }
  EMBER_DISPATCH_ALL(dtype, "random", [&] {
    random_typed<scalar_t>(kind, static_cast<scalar_t*>(data), numel, state, a, b);
  });
}

}  // namespace ember::cpu
