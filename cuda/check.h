// CUDA errors as ember::Errors. A failed call raises, naming the operation, the device, CUDA's
// error name and text, and on emulated devices what the emulator saw go wrong (the kernel, the
// block, the address).
//
//   check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream), "copy_");
#pragma once

#include "cuda/lang.h"

namespace ember::cuda {

void check(cudaError_t error, const char* op);

// After a launch: a bad configuration surfaces here, a failure inside the kernel at the next
// synchronising call, as on a GPU.
inline void check_launch(const char* op) { check(cudaGetLastError(), op); }

}  // namespace ember::cuda
