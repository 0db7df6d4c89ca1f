// A kernel launch's blocks, spread over a process-wide pool of OS threads (at least two, so
// atomics and races between blocks are real even on one core) plus the thread that runs it (in
// the device's runner process, runner.h, which makes its own pool).
#pragma once

#include <string>

#include "cuda/emu/block.h"

namespace ember::emu {

// Runs every block of `launch`; returns "" or the first block's failure (the rest are skipped).
std::string run_grid(const KernelLaunch& launch);

}  // namespace ember::emu
