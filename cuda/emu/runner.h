// Kernel runners: one process per emulated device, forked when the devices are created (before
// the emulator starts any thread), with the device heaps and pinned memory at the same addresses.
// Only there is a device's heap readable and writable: in its own runner, and in the runners of
// devices granted peer access to it. The host's stream worker hands a launch over (its arguments
// copied into a slot both processes map) and waits for its result. A runner that dies (a fault in a
// kernel, a sanitizer report, a kill) fails its device for good, naming it; a runner ends when its
// host process does (end of file on its socket), and a forked child of the host cannot use them.
#pragma once

#include <string>
#include <vector>

#include "cuda/emu/block.h"

namespace ember::emu {

class DeviceHeap;

// Forks the runner of each device (heaps[d] is cuda:d's). Called once, before any stream exists.
void start_runners(const std::vector<DeviceHeap*>& heaps);

// Runs `launch` (its `args_bytes` bytes of arguments at `args`) on its device's runner and waits:
// "" or why it failed (what run_grid says, or what ended the runner).
std::string run_on_runner(const KernelLaunch& launch);

// Makes `peer`'s heap reachable (or not) for the kernels of `device` launched from now on.
void set_runner_peer_access(int device, int peer, bool enabled);

// True in a child forked after the runners started: the devices are its parent's.
bool forked_from_device_owner();

// The runner's process id (benchmarks read its CPU time), or -1.
int runner_pid(int device);

}  // namespace ember::emu
