// OpenBLAS's core type for the benchmarks that use it as a yardstick. OpenBLAS reads
// OPENBLAS_CORETYPE once, when it loads (before main), and on the AVX-512 VM (Zen 4) these
// benchmarks were first run on its auto-detection picked a kernel 10x slower than its SkylakeX
// one. On CPUs with AVX-512 this sets SkylakeX and re-executes the program; on others (where the
// SkylakeX kernels die of an illegal instruction) it leaves the detection alone.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ember::bench {

// Call first in main. Returns only when the program should go on (false: the re-exec failed).
inline bool pin_openblas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || !__builtin_cpu_supports("avx512f")) return true;
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  execv("/proc/self/exe", argv);
  std::perror((std::string(argv[0]) + ": re-exec with OPENBLAS_CORETYPE=SkylakeX failed").c_str());
  return false;
}

}  // namespace ember::bench
