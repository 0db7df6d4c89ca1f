// What the CPU backend reads about the machine beyond its instruction sets (isa.h): the
// description that keys core/kernel_select.h's disk cache, registered with it at start-up so that
// core itself reads no /proc or /sys files.
#pragma once

#include <string>

namespace ember::cpu {

// The CPU's model name (/proc/cpuinfo), cpu0's caches (sysfs: " L1d=48K L1i=32K L2=1024K ...")
// and the EMBER_CPU_ISA cap when set (" isa=avx2"): what makes a kernel decision made on this
// machine valid on another run. Read afresh on every call (tests change EMBER_CPU_ISA).
std::string machine_description();

}  // namespace ember::cpu
