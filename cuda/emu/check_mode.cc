// EMBER_EMU_CHECK, read on first use.
#include "cuda/emu/check_mode.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace ember::emu {

namespace {

std::atomic<int> check_setting{-1};

bool check_from_environment() {
  const char* env = std::getenv("EMBER_EMU_CHECK");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "0") == 0) return false;
  if (std::strcmp(env, "1") == 0) return true;
  EMBER_FAIL("EMBER_EMU_CHECK: expected 1 or 0, got '", env, "'");
}

}  // namespace

bool checking() {
  int setting = check_setting.load(std::memory_order_relaxed);
  if (setting < 0) {
    setting = check_from_environment() ? 1 : 0;
    check_setting.store(setting, std::memory_order_relaxed);
  }
  return setting == 1;
}

void set_checking(bool on) { check_setting.store(on ? 1 : 0, std::memory_order_relaxed); }

}  // namespace ember::emu
