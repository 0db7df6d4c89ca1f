// The backends the op driver runs its tables on (tests/backends/backend_ops_test.cc): the CPU,
// then every CUDA device the CUDA runtime reports (emulated ones where EMBER_EMULATED_GPUS is set),
// each with what its tests may assume and afford. Adding a backend is one entry in backends.cc.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "tests/core/op_harness.h"

namespace ember::test {

struct Backend {
  Device device;
  // The op table (tests/core/op_cases.h): random trials per case and dtype, and the cases this
  // backend does not serve (none so far; the driver reports them as skipped).
  int op_trials = 10;
  std::set<std::string> skip;
  // The cases run again on large inputs (HarnessOptions::large), with their trials and dtypes;
  // the CPU splits them across `large_threads` threads (0: as configured).
  std::set<std::string> large_cases;
  HarnessOptions large;
  int large_threads = 0;
  // Switches the backend's TF32 convolutions (set for CUDA: cuDNN's default on real GPUs rounds
  // float32 inputs to 10 mantissa bits, which the conv cases' float32 tolerance does not allow).
  std::function<void(bool allow)> allow_tf32;
  // The gradient checks (tests/autograd/gradcheck.h): the first this many cases of each family.
  int grad_cases_per_family = 1 << 30;
};

// Every backend of this build and process, the CPU first.
const std::vector<Backend>& all_backends();

}  // namespace ember::test
