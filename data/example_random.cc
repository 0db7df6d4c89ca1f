// ExampleRandom: Philox blocks handed out one 32-bit word at a time.
#include "data/example_random.h"

#include "core/error.h"
#include "core/random.h"

namespace ember::data {

namespace {

uint64_t join_words(uint32_t hi, uint32_t lo) { return (static_cast<uint64_t>(hi) << 32) | lo; }

}  // namespace

uint64_t derive_key(uint64_t seed, uint64_t a, uint64_t b) {
  std::array<uint32_t, 4> first = philox4x32(seed, a);
  std::array<uint32_t, 4> second = philox4x32(join_words(first[0], first[1]), b);
  return join_words(second[0], second[1]);
}

ExampleRandom::ExampleRandom(uint64_t seed, int64_t epoch, int64_t index)
    : key_(derive_key(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index))) {}

uint32_t ExampleRandom::next_u32() {
  if (used_ == 4) {
    block_ = philox4x32(key_, counter_++);
    used_ = 0;
  }
  return block_[used_++];
}

uint64_t ExampleRandom::next_u64() {
  uint32_t hi = next_u32();
  return join_words(hi, next_u32());
}

float ExampleRandom::uniform() { return uniform_float(next_u32()); }

int64_t ExampleRandom::randint(int64_t low, int64_t high) {
  EMBER_CHECK(low < high, "ExampleRandom::randint: expected low < high, got [", low, ", ", high, ")");
  uint64_t range = static_cast<uint64_t>(high - low);
  unsigned __int128 scaled = static_cast<unsigned __int128>(next_u64()) * range;
  return low + static_cast<int64_t>(scaled >> 64);
}

bool ExampleRandom::bernoulli(double p) {
  // Two statements: the order of evaluation of function arguments is unspecified.
  uint32_t hi = next_u32();
  return uniform_double(hi, next_u32()) < p;
}

}  // namespace ember::data
