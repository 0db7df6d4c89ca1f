// The pipeline bench's Schedule::kAuto grid: over (stages, micro-batches, activation budget), every
// schedule measured, then kAuto's choice checked against the measured-fastest feasible one and
// its simulated step time against its measured one (tools/bench/pipeline.cc prints the summary).
#pragma once

#include <cstdint>
#include <vector>

namespace ember::bench {

struct AutoGridResult {
  double within_5pct = 0;  // share of cases: auto's choice feasible and within 5% of the fastest
  double sim_err_max = 0;  // largest |simulated - measured| / measured of auto's choices
};

// Stages `ps` (one per emulated or real CUDA device; only 2 with `quick`), m in {4, 8} ({4} with
// `quick`), each device's forward and backward waiting `action_s` over its 4 layers. Prints a
// table per case.
AutoGridResult run_auto_grid(const std::vector<int64_t>& ps, bool quick, double action_s);

}  // namespace ember::bench
