// Host call stacks taken cheaply (return addresses only) and symbolised only when a report needs
// them: where a guarded allocation was made (cuda/emu/guards.h).
#pragma once

#include <cstdint>
#include <string>

namespace ember::emu {

struct HostBacktrace {
  static constexpr int kMaxFrames = 32;
  void* frames[kMaxFrames];
  int count = 0;
};

// The caller's stack, without the innermost `skip` frames (this function's own is never kept).
HostBacktrace capture_backtrace(int skip);
// One line per frame ("    #2 ember::zeros(...) in emu_death_main"): names from the dynamic symbol
// table, else addr2line on the frame's module; the emulator's own innermost frames, the standard
// library's and the C runtime's start-up are left out.
std::string describe(const HostBacktrace& trace);

// The first line addr2line prints for `offset` in `module` with `options` ("-f -C": the function;
// "-i": the innermost inlined source line), without its newline; "" if it could not run.
std::string addr2line(const std::string& module, uintptr_t offset, const char* options);

}  // namespace ember::emu
