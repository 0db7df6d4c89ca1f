// The CPU's and the CUDA devices' test settings. Sanitizers and the emulator's delay mode slow a
// CUDA device down, not the CPU: only the CUDA entries run fewer trials under them.
#include "tests/backends/backends.h"

#include <cstdlib>

#include "cuda/api.h"
#include "cuda/conv.h"

namespace ember::test {
namespace {

// Under AddressSanitizer the emulator runs ~15 times slower: fewer random trials per dtype still
// reach every kernel and layout variant with ASan watching, within the test's time limit; the
// plain build runs the full count.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// The emulator's delay mode (EMBER_EMU_DELAY=1) holds back every queued operation.
bool emulator_delays() {
  const char* delay = std::getenv("EMBER_EMU_DELAY");
  return delay != nullptr && *delay != '\0' && *delay != '0';
}

Backend cpu_backend() {
  Backend b{.device = Device(kCPU)};
  // Large inputs reach the kernels' parallel and blocked paths (row chunks starting mid-row,
  // reductions split across threads, tiled row sums). Three threads split the work differently
  // from the default, and must not change any result beyond rounding. A few cases per kernel
  // family keep this fast.
  b.large_cases = {"exp",     "abs",         "clamp",  "add",       "where",        "lt",
                   "sum",     "mean",        "amax",   "norm_pinf", "var_unbiased", "logsumexp",
                   "max_dim", "argmin_flat", "matmul", "cat_2",     "to_float32",   "copy_from_int32",
                   "add_"};
  b.large.large = true;
  b.large.trials = 2;
  b.large.only_dtypes = {kFloat32, kInt32};
  b.large_threads = 3;
  return b;
}

Backend cuda_backend(int index) {
  Backend b{.device = Device::cuda(index)};
  b.op_trials = kSanitized ? 4 : 10;
  // Many blocks and block-per-output reductions.
  b.large_cases = {"exp",       "add",          "where",   "lt",          "sum",        "mean", "amax",
                   "norm_pinf", "var_unbiased", "max_dim", "argmin_flat", "to_float32", "add_"};
  b.large.large = true;
  b.large.trials = kSanitized ? 1 : 2;
  b.large.only_dtypes = kSanitized ? std::vector<DType>{kFloat32} : std::vector<DType>{kFloat32, kInt32};
  b.allow_tf32 = [](bool allow) { cuda::set_cudnn_allow_tf32(allow); };
  // With ASan or the delays in force the first cases of each family still run every kernel
  // family, within the test's time limit. The plain run runs all.
  if (kSanitized || emulator_delays()) b.grad_cases_per_family = 2;
  return b;
}

}  // namespace

const std::vector<Backend>& all_backends() {
  static const std::vector<Backend> backends = [] {
    std::vector<Backend> list = {cpu_backend()};
    for (int i = 0; i < cuda::device_count(); ++i) list.push_back(cuda_backend(i));
    return list;
  }();
  return backends;
}

}  // namespace ember::test
