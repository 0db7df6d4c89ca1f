// The CPU backend's parallel loop, on OpenMP's thread team (the one oneDNN uses). parallel_for
// splits [begin, end) into at most num_threads() contiguous chunks of at least `grain` elements.
// Calls from inside a task, or while another thread holds the team (a data-loader worker, a second
// training thread), run inline on the caller: never deadlock, never more threads than asked for.
#pragma once

#include <cstdint>
#include <functional>

namespace ember::cpu {

// EMBER_NUM_THREADS, else the number of cores. set_num_threads sets the team size for later calls.
int num_threads();
void set_num_threads(int threads);

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

// True inside a parallel_for body that runs as part of the team.
bool in_parallel_region();

}  // namespace ember::cpu
