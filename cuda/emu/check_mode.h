// The emulator's checking mode (EMBER_EMU_CHECK=1): the checks a GPU's compute-sanitizer makes
// that cost too much to run always (shared-memory race detection, guarded allocations). One switch
// for all of them, read once; tests may set it before the first CUDA call.
#pragma once

namespace ember::emu {

// EMBER_EMU_CHECK=1 (or 0, or unset: off); anything else is an ember::Error naming the variable.
bool checking();
void set_checking(bool on);

}  // namespace ember::emu
