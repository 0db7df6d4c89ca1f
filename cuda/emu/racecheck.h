// Shared-memory race detection (racecheck) for the checking mode, EMBER_EMU_CHECK=1. Emulated
// kernels are compiled with GCC's ThreadSanitizer instrumentation but without its runtime:
// tsan_entry.cc receives every load and store and, only while this OS thread runs a block in
// checking mode, passes those to shared memory (__shared__ and the launch's dynamic shared memory)
// to the block's race record here. The block scheduler (block.cc) marks barriers and warp operations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::emu::racecheck {

// The first race of a block: two threads of the block touched the same bytes of shared memory,
// at least one of them writing, with no barrier or warp operation of both between the accesses.
struct Race {
  bool found = false;
  unsigned earlier_thread = 0, later_thread = 0;  // linear indices in the block
  bool earlier_wrote = false, later_wrote = false;
  const void* earlier_site = nullptr;  // return addresses into the instrumented kernel
  const void* later_site = nullptr;
  bool dynamic_shared = false;  // in the launch's dynamic shared memory (else a __shared__ variable)
  size_t dynamic_offset = 0;    // its byte offset there
};

// The block scheduler's side, on the OS thread that runs the block. `threads` are the block's,
// numbered as the scheduler's slots (x fastest); warps are consecutive runs of 32.
void begin_block(unsigned threads, const void* dynamic_shared, size_t dynamic_bytes);
void barrier_passed();
// The lanes of `mask` of the warp whose lane 0 is thread `first` completed a warp operation.
void warp_synchronised(unsigned first, unsigned mask);
// Stops recording on this OS thread and returns what the block did.
Race end_block();

// The race-checking copies of launches' thread loops (cuda/emu/emu.h), by kernel_key(): registered
// as libraries load; null for a key that none, or two different ones, registered.
using ThreadLoop = void (*)(const void* args);
void register_copy(const std::string& key, ThreadLoop run_threads);
ThreadLoop registered_copy(const std::string& key);

// "file:line" of a return address in instrumented code (from its line table, through addr2line),
// or "module+0xoffset" without one; for reports only, it starts a process.
std::string source_line(const void* return_address);

// tsan_entry.cc's side: the record of the block this OS thread runs in checking mode, or null (the
// one test every instrumented access makes in the default mode).
struct BlockRecord;
extern constinit thread_local BlockRecord* active __attribute__((tls_model("initial-exec")));
void record(BlockRecord& block, uintptr_t address, size_t bytes, bool write, const void* site);

}  // namespace ember::emu::racecheck
