// Ctrl-C (SIGINT) for the train tool, taken by a thread of its own. Every other thread blocks it,
// so none is ever interrupted: no handler runs on a compute, loader, emulator or communication
// thread, and none of their system calls fails with EINTR.
//
//   int main(...) { start_interrupt_watcher(); ... }        // before any other thread exists
//   checkpoint_on_interrupt();                              // when the training loop starts
//   for (...) { step(); if (interrupt_requested()) { save(); break; } }
#pragma once

namespace ember::train {

// Blocks SIGINT in the calling thread, so in every thread started after it, and starts the thread
// that takes it. Until checkpoint_on_interrupt(), a Ctrl-C ends the process as SIGINT's default
// action would (nothing is trained yet); after it, the first one only sets interrupt_requested()
// and a second one exits at once with status 130. Call it first in main, before any other thread
// (one started earlier could still take a SIGINT); a child process would inherit the block (the
// tool starts none).
void start_interrupt_watcher();
void checkpoint_on_interrupt();
bool interrupt_requested();

}  // namespace ember::train
