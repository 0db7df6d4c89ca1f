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
// x[i] = value for i < n; with `one_past_end` the bound is i <= n (the planted off-by-one).
cudaError_t fill(float* x, int n, float value, bool one_past_end, cudaStream_t stream);
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

// out[b] = the sum of x[b * threads, (b + 1) * threads) for each of `blocks` blocks, by a
// shared-memory tree (threads a power of two, up to 1024); without `with_barrier`, the
// __syncthreads between its steps is missing: a race on the partial sums.
cudaError_t tree_reduce(const float* x, float* out, int blocks, int threads, bool with_barrier, cudaStream_t stream);
// The source line of the tree's step, which reads and writes the partial sums.
int tree_reduce_step_line();

// One block of `threads` threads touching shared memory in one pattern; out has a slot per thread.
enum class SharedAccess {
  WriteWrite,          // every thread stores its index to one word (a race)
  ReadWrite,           // thread 0 stores a word that the others load, with no barrier (a race)
  ReadAfterBarrier,    // the same with a __syncthreads between: out[t] = 7
  WarpSynchronous,     // lane 0 stores its warp's word, __syncwarp, the lanes load it (out[t] = warp + 1),
                       // __syncwarp, lane 31 overwrites it
  WarpUnsynchronised,  // the same without the __syncwarps (a race between lanes of one warp)
  Atomic,              // every thread atomicAdds 1 to one word between barriers: out[0] = threads
};
cudaError_t shared_access(SharedAccess pattern, int* out, int threads, cudaStream_t stream);
// The source lines where shared_access stores and loads its words.
int shared_store_line();
int shared_load_line();

}  // namespace ember::testing
