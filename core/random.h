// Generator: counter-based Philox4x32-10 state (seed, offset). A fill of n elements takes
// counters [offset, offset + n) and advances offset, so values depend only on the seed and the
// order of fills, never on thread counts or devices.
//
//   ember::manual_seed(42);
//   auto a = ember::rand({3});   // same values on every run, any EMBER_NUM_THREADS
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

#include "core/backend.h"

namespace ember {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : seed_(seed) {}
  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  // Reserves `count` counters and returns the state to fill them from. Thread-safe.
  PhiloxState reserve(uint64_t count);
  // (seed, offset) for checkpoints; set_state restores it exactly.
  std::array<uint64_t, 2> state() const;
  void set_state(const std::array<uint64_t, 2>& state);

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);

// Philox4x32-10: four 32-bit words for (key, counter). Device-neutral, header-only so every
// backend computes the same bits.
inline std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter) {
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
  return {c0, c1, c2, c3};
}

// Uniform in [0, 1) with 24 (float) or 53 (double) random bits.
inline float uniform_float(uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }
inline double uniform_double(uint32_t hi, uint32_t lo) {
  uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace ember
