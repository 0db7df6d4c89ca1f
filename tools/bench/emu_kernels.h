// Kernels timed by tools/bench/emu.cc, written as they would be for a GPU.
#pragma once

#include "cuda/lang.h"

namespace ember::bench {

// Every thread of one block of `threads` passes `barriers` __syncthreads.
void barrier_loop(float* out, int threads, int barriers, cudaStream_t stream);
// c = a + b over n floats: 16 contiguous elements per thread.
void add_floats(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream);
// One block of one thread that does nothing: what a launch itself costs.
void empty_kernel(cudaStream_t stream);
// C = A B for n x n row-major matrices, 16 x 16 shared-memory tiles.
void tiled_gemm(const float* a, const float* b, float* c, int n, cudaStream_t stream);

}  // namespace ember::bench
