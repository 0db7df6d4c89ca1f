// The random numbers themselves: Philox4x32-10 and what a fill makes of its words. Element i of a
// fill takes counter offset + i, so every backend, thread split and device produces the same
// values from (seed, offset). EMBER_HOST_DEVICE: the CPU and CUDA kernels both compute here.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/dtype.h"
#include "core/elementwise_math.h"
#include "core/host_device.h"
#include "core/portable_math.h"

namespace ember {

enum class RandomKind : uint8_t { Uniform, Normal, Bernoulli, RandInt };

// Counter-based random state: element i of a fill gets Philox(key=seed, counter=offset+i),
// independent of how the fill is split across threads or devices.
struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

struct PhiloxWords {
  uint32_t w[4];
  EMBER_HOST_DEVICE uint32_t operator[](int i) const { return w[i]; }
};

EMBER_HOST_DEVICE inline PhiloxWords philox_words(uint64_t key, uint64_t counter) {
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 24 (float) or 53 (double) random bits.
EMBER_HOST_DEVICE inline float uniform_float(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}
EMBER_HOST_DEVICE inline double uniform_double(uint32_t hi, uint32_t lo) {
  uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// One value for counter `counter`, in double: Uniform [a, b), Normal(mean a, std b),
// Bernoulli(p = a), RandInt [a, b). Through portable_math.h, so every backend draws the same bits.
EMBER_HOST_DEVICE inline double random_value(RandomKind kind, uint64_t seed, uint64_t counter, double a, double b) {
  const PhiloxWords w = philox_words(seed, counter);
  switch (kind) {
    case RandomKind::Uniform:
      return portable::add(a, portable::mul(b - a, uniform_double(w[0], w[1])));
    case RandomKind::Normal: {
      // Box-Muller; 1 - u keeps the log argument in (0, 1].
      double u1 = 1.0 - uniform_double(w[0], w[1]);
      double u2 = uniform_double(w[2], w[3]);
      const double radius = ::sqrt(-2.0 * portable::log(u1));  // sqrt is correctly rounded everywhere
      return portable::add(a, portable::mul(portable::mul(b, radius), portable::cos_two_pi(u2)));
    }
    case RandomKind::Bernoulli:
      return uniform_double(w[0], w[1]) < a ? 1.0 : 0.0;
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
EMBER_HOST_DEVICE T largest_below(double b) {
  T t = static_cast<T>(static_cast<ComputeType<T>>(b));
  if (static_cast<double>(static_cast<ComputeType<T>>(t)) < b) return t;
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
    // Sign-magnitude bits: one step toward -inf.
    if ((t.bits & 0x7fff) == 0)
      t.bits = 0x8001;
    else if (t.bits & 0x8000)
      ++t.bits;
    else
      --t.bits;
    return t;
  } else if constexpr (std::is_same_v<T, float>) {
    return ::nextafterf(t, -std::numeric_limits<float>::infinity());
  } else {
    return ::nextafter(t, -std::numeric_limits<double>::infinity());
  }
}

// Element `counter` of a fill of T.
template <typename T>
EMBER_HOST_DEVICE T random_element(RandomKind kind, uint64_t seed, uint64_t counter, double a, double b) {
  if constexpr (std::is_same_v<T, int64_t>) {
    if (kind == RandomKind::RandInt) {
      // Exact for ranges beyond 2^53, which the double path would round.
      const PhiloxWords w = philox_words(seed, counter);
      uint64_t range = static_cast<uint64_t>(static_cast<int64_t>(b) - static_cast<int64_t>(a));
      uint64_t bits = (static_cast<uint64_t>(w[0]) << 32) | w[1];
      return static_cast<int64_t>(a) + static_cast<int64_t>(bits % range);
    }
  }
  const double v = random_value(kind, seed, counter, a, b);
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_floating_point_v<ComputeType<T>>) {
    T t = static_cast<T>(static_cast<ComputeType<T>>(v));
    // Rounding to a narrower float can reach the open upper bound of uniform [a, b).
    if (kind == RandomKind::Uniform && b > a && static_cast<double>(static_cast<ComputeType<T>>(t)) >= b)
      t = largest_below<T>(b);
    return t;
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace ember
