// Kernels that exercise the CUDA execution model (tests/cuda/*_test.cc), written once for nvcc and
// cuda/emu. Each host function queues its kernel on `stream` and returns cudaGetLastError().
#pragma once

#include "cuda/lang.h"

namespace ember::testing {

// Sums x[0, n) into *out (zeroed by the caller): per block a shared-memory tree down to a warp,
// then warp shuffles, then one atomicAdd per block.
cudaError_t block_reduce_sum(const float* x, int n, float* out, int blocks, int threads, cudaStream_t stream);
// out[i] = s[i - 1] (0 for the first thread of a block) after each thread stored in[i] to s[i]:
// correct only with the __syncthreads between store and load, whatever order the threads run in.
cudaError_t shift_in_block(const float* in, float* out, int n, int threads, bool with_barrier, cudaStream_t stream);
// Threads below `arrive` reach a __syncthreads, the others exit (or, with `other_site`, wait at a
// different __syncthreads): a divergent barrier.
cudaError_t divergent_barrier(int threads, int arrive, bool other_site, cudaStream_t stream);
// Reverses each block's chunk of x through dynamic shared memory of `shared_floats` floats; with
// `overrun`, one thread writes one float past it.
cudaError_t reverse_chunks(const float* x, float* out, int n, int threads, int shared_floats, bool overrun,
                           cudaStream_t stream);
// counter += 1 and max = max(max, i) for every thread i of the grid.
cudaError_t count_threads(unsigned* counter, int* max, int blocks, int threads, cudaStream_t stream);
// out[i] = a * x[i].
cudaError_t scale(const float* x, float* out, float a, int n, cudaStream_t stream);
// Each thread stores the address of a local of a function that has returned in slots[thread] and
// reads it into out[thread]: a stack use after return (undefined; AddressSanitizer reports it).
cudaError_t read_after_return(int** slots, int* out, int threads, cudaStream_t stream);
// Spins until *flag (pinned host memory) becomes non-zero.
cudaError_t wait_for_host_flag(const volatile int* flag, cudaStream_t stream);
// Sets *running (pinned) to 1, then spins until *release (pinned) becomes non-zero: the host knows
// that a kernel is running on the stream's device until it lets it go.
cudaError_t hold_device(volatile int* running, const volatile int* release, cudaStream_t stream);
// For each lane of a 64-thread block: the results of every warp operation with `width` (see the
// test for the exact semantics checked): 8 outputs per thread.
cudaError_t warp_operations(const int* in, int* out, int width, cudaStream_t stream);
// Lanes 0-15 call __shfl_down_sync with a full mask while lanes 16-31 exit.
cudaError_t shuffle_with_missing_lanes(int* out, cudaStream_t stream);

}  // namespace ember::testing
