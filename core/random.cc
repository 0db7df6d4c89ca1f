// The global generator and Generator's thread-safe counter reservation.
#include "core/random.h"

namespace ember {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

PhiloxState Generator::reserve(uint64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  PhiloxState state{seed_, offset_};
  offset_ += count;
  return state;
}

std::array<uint64_t, 2> Generator::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {seed_, offset_};
}

void Generator::set_state(const std::array<uint64_t, 2>& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = state[0];
  offset_ = state[1];
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace {
thread_local Generator* thread_generator = nullptr;
}  // namespace

Generator& current_generator() { return thread_generator != nullptr ? *thread_generator : default_generator(); }

GeneratorGuard::GeneratorGuard(Generator* generator) : previous_(thread_generator) { thread_generator = generator; }
GeneratorGuard::~GeneratorGuard() { thread_generator = previous_; }

}  // namespace ember
