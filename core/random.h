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
#include "core/random_math.h"

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
// The generator random ops use when given none: this thread's GeneratorGuard's, else the default.
Generator& current_generator();

// Makes `generator` this thread's generator for random ops given none, for the scope: a pipeline
// stage draws a micro-batch's dropout masks from a generator of its own, so that recomputing the
// forward replays them and no other thread's draws interleave.
class GeneratorGuard {
 public:
  explicit GeneratorGuard(Generator* generator);
  ~GeneratorGuard();
  GeneratorGuard(const GeneratorGuard&) = delete;
  GeneratorGuard& operator=(const GeneratorGuard&) = delete;

 private:
  Generator* previous_;
};

// Philox4x32-10's four words for (key, counter), as an array for host code (random_math.h has
// the device-capable form).
inline std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter) {
  const PhiloxWords w = philox_words(key, counter);
  return {w[0], w[1], w[2], w[3]};
}

}  // namespace ember
