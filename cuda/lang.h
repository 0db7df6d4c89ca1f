// What every CUDA source of Ember includes: the CUDA runtime and language, real under nvcc and
// emulated (cuda/emu) otherwise, plus the two constructs that differ in spelling between them.
//
//   EMBER_LAUNCH(kernel, grid, block, shared_bytes, stream, args...);   // kernel<<<...>>>(args...)
//   EMBER_DYNAMIC_SHARED(float, tile);   // extern __shared__ memory of the launch's shared_bytes
//
// A launch's configuration errors are reported by cudaGetLastError(), its failures by the next
// synchronising call, in both builds.
#pragma once

// Unrolls the next loop: nvcc's pragma, or GCC's in the emulated build.
#if defined(__CUDACC__)
#define EMBER_UNROLL _Pragma("unroll")
#else
#define EMBER_UNROLL _Pragma("GCC unroll 8")
#endif

#if defined(__CUDACC__) || defined(EMBER_CUDA)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define EMBER_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__)
#define EMBER_DYNAMIC_SHARED(T, name)                                    \
  extern __shared__ __align__(16) unsigned char ember_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(ember_dynamic_shared_)
#else
#include "cuda/emu/cuda_runtime.h"
#include "cuda/emu/emu.h"
#include "cuda/emu/lang.h"

#define EMBER_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  (void)::ember::emu::launch<kernel>(#kernel, (grid), (block), (shared_bytes), (stream), __VA_ARGS__)
#if defined(EMBER_EMU_SHARED_MEMORY_SCAN)
#define EMBER_DYNAMIC_SHARED(T, name) ember_emu_uses_shared_memory
#else
#define EMBER_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::ember::emu::dynamic_shared_memory())
#endif
#endif
