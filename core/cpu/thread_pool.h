// The CPU backend's thread pool. parallel_for splits [begin, end) into at most num_threads()
// contiguous chunks of at least `grain` elements. Calls from inside a pool task, or while another
// thread holds the pool (e.g. DataParallel replicas), run inline on the caller: never deadlock.
#pragma once

#include <cstdint>
#include <functional>

namespace ember::cpu {

// EMBER_NUM_THREADS, else the number of cores. set_num_threads resizes the pool.
int num_threads();
void set_num_threads(int threads);

void parallel_for(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

// True inside a parallel_for body that runs on a pool worker.
bool in_parallel_region();

}  // namespace ember::cpu
