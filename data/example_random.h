// ExampleRandom: the random stream of one example in one epoch, a pure function of
// (seed, epoch, index) built on Philox, so augmentations and shuffles never depend on which thread
// ran them or in which order. Not thread-safe; each example gets its own stream.
//
//   ember::data::ExampleRandom random(/*seed=*/7, /*epoch=*/2, /*index=*/123);
//   int64_t top = random.randint(0, 9);   // same value on every run, any worker count
#pragma once

#include <array>
#include <cstdint>

namespace ember::data {

// Mixes (seed, a, b) into a 64-bit Philox key with two Philox rounds, so nearby inputs such as
// consecutive epochs or indices give unrelated keys.
uint64_t derive_key(uint64_t seed, uint64_t a, uint64_t b);

class ExampleRandom {
 public:
  ExampleRandom(uint64_t seed, int64_t epoch, int64_t index);
  // A stream keyed directly; the sampler and the synthetic dataset use their own derivations.
  explicit ExampleRandom(uint64_t key) : key_(key) {}

  uint32_t next_u32();
  uint64_t next_u64();
  // Uniform in [0, 1) with 24 random bits.
  float uniform();
  // Uniform integer in [low, high); needs low < high. Multiply-shift on 64 random bits: the bias
  // is below (high - low) / 2^64, far under anything a data pipeline could notice.
  int64_t randint(int64_t low, int64_t high);
  // True with probability p.
  bool bernoulli(double p);

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
  std::array<uint32_t, 4> block_{};
  int used_ = 4;  // words of block_ already handed out
};

}  // namespace ember::data
