// main() of the op driver: `support` and `perf` walk the op table on every backend and print a
// table; anything else is Catch2's command line (sharded, tests/catch_session.h).
//
//   backend_ops_test support [CASE...]   per case × dtype × backend: ok, unsupported, skipped or error
//   backend_ops_test perf [CASE...]      per case × dtype × backend: the median time of one call
//
// CASE selects cases by name prefix ("add" takes add, add_scalar, add_...); none: every case.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cuda/api.h"
#include "tests/backends/backends.h"
#include "tests/catch_session.h"
#include "tests/core/op_cases.h"

using namespace ember;
using namespace ember::test;

namespace {

std::vector<OpCase> selected_cases(int argc, char** argv) {
  std::vector<OpCase> cases;
  for (OpCase& c : all_op_cases()) {
    bool chosen = argc == 0;
    for (int i = 0; i < argc; ++i) chosen = chosen || c.name.rfind(argv[i], 0) == 0;
    if (chosen) cases.push_back(std::move(c));
  }
  return cases;
}

void print_header(const char* first) {
  std::printf("%-36s %-9s", first, "dtype");
  for (const Backend& backend : all_backends()) std::printf(" %12s", backend.device.str().c_str());
  std::printf("\n");
}

// One trial per case and dtype: `ok` when it matches the reference (or raises the error an error
// case expects), `unsupported` when the backend raises "not supported", `skipped` when the
// backend's skip list names it, `error` otherwise (the first failure follows the table).
int support(int argc, char** argv) {
  const std::vector<OpCase> cases = selected_cases(argc, argv);
  std::vector<std::string> errors;
  int counts[4] = {0, 0, 0, 0};
  const char* const kWords[4] = {"ok", "unsupported", "skipped", "error"};
  print_header("case");
  for (const OpCase& c : cases) {
    for (DType dtype : c.dtypes) {
      std::printf("%-36s %-9s", c.name.c_str(), dtype_name(dtype));
      for (const Backend& backend : all_backends()) {
        int verdict = 0;
        if (backend.skip.count(c.name)) {
          verdict = 2;
        } else {
          HarnessOptions options;
          options.trials = 1;
          options.only_dtypes = {dtype};
          const std::vector<std::string> failures = check_op_case(c, backend.device, options);
          if (!failures.empty()) {
            verdict = failures[0].find("not supported") != std::string::npos ? 1 : 3;
            if (verdict == 3) errors.push_back(backend.device.str() + ": " + failures[0]);
          }
        }
        ++counts[verdict];
        std::printf(" %12s", kWords[verdict]);
      }
      std::printf("\n");
    }
  }
  for (const std::string& error : errors) std::printf("%s\n", error.c_str());
  std::printf("support backend_ops: cases=%zu backends=%zu ok=%d unsupported=%d skipped=%d error=%d\n", cases.size(),
              all_backends().size(), counts[0], counts[1], counts[2], counts[3]);
  return counts[3] == 0 ? 0 : 1;
}

// Waits for the device's queued work, so that a time covers the kernels and not their launch.
void finish(const Backend& backend) {
  if (backend.device.is_cuda()) cuda::synchronize(backend.device.index);
}

// Of the first 8 seeds' draws of large shapes (a draw may be a 0-dim tensor), the trial with the
// most input elements: the same seed for every backend.
TrialInputs largest_trial(const OpCase& c, DType dtype, Device device) {
  uint64_t best_seed = 1;
  int64_t best_elements = -1;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    int64_t elements = 0;
    for (const Tensor& t : make_trial_inputs(c, dtype, Device(kCPU), seed).tensors) elements += t.numel();
    if (elements > best_elements) best_elements = elements, best_seed = seed;
  }
  return make_trial_inputs(c, dtype, device, best_seed);
}

// Microseconds per call of each case on large inputs (HarnessOptions::large), the inputs drawn
// once per case and dtype: the median of `kRuns` calls after one warm-up call. Error cases, and
// calls that raise, are left out ("-"); the totals add the rows (case × dtype) timed on every
// backend.
int perf(int argc, char** argv) {
  constexpr int kRuns = 5;
  const std::vector<OpCase> cases = selected_cases(argc, argv);
  std::vector<double> totals(all_backends().size(), 0.0);
  int timed = 0;
  std::set<std::string> timed_cases;
  print_header("case (us per call)");
  test::detail::set_large_shapes(true);
  for (const OpCase& c : cases) {
    if (!c.expect_error.empty()) continue;
    for (DType dtype : c.dtypes) {
      std::printf("%-36s %-9s", c.name.c_str(), dtype_name(dtype));
      bool all_timed = true;
      std::vector<double> medians;
      for (const Backend& backend : all_backends()) {
        double median = -1;
        if (!backend.skip.count(c.name)) {
          try {
            const TrialInputs trial = largest_trial(c, dtype, backend.device);
            std::vector<double> times;
            for (int run = 0; run <= kRuns; ++run) {
              // In-place cases write their first input: each call gets fresh copies.
              std::vector<Tensor> inputs = trial.tensors;
              if (c.inplace_dest >= 0)
                for (Tensor& t : inputs) t = t.clone();
              finish(backend);
              const auto start = std::chrono::steady_clock::now();
              c.run(inputs, trial.args);
              finish(backend);
              const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
              if (run > 0) times.push_back(took.count());
            }
            std::nth_element(times.begin(), times.begin() + kRuns / 2, times.end());
            median = times[kRuns / 2];
          } catch (const std::exception&) {
            median = -1;
          }
        }
        medians.push_back(median);
        all_timed = all_timed && median >= 0;
        if (median >= 0)
          std::printf(" %12.1f", median);
        else
          std::printf(" %12s", "-");
      }
      std::printf("\n");
      if (all_timed) {
        ++timed;
        timed_cases.insert(c.name);
        for (size_t i = 0; i < medians.size(); ++i) totals[i] += medians[i];
      }
    }
  }
  test::detail::set_large_shapes(false);
  std::printf("bench backend_ops: cases=%zu rows=%d runs=%d", timed_cases.size(), timed, kRuns);
  for (size_t i = 0; i < totals.size(); ++i)
    std::printf(" %s_total_ms=%.1f", all_backends()[i].device.str().c_str(), totals[i] / 1000);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "support") == 0) return support(argc - 2, argv + 2);
  if (argc >= 2 && std::strcmp(argv[1], "perf") == 0) return perf(argc - 2, argv + 2);
  return run_catch_session(argc, argv);
}
