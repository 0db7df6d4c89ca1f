// Grad mode: whether ops record the autograd graph. Thread-local, so DataParallel's replica
// threads and a NoGradGuard in one thread never affect another.
#pragma once

namespace ember {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Disables graph recording for the current scope and thread (like torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

class EnableGradGuard {
 public:
  explicit EnableGradGuard(bool enabled = true) : previous_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~EnableGradGuard() { GradMode::set_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace ember
