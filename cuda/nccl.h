// NCCL for Ember's CUDA code: the real <nccl.h> under nvcc and in host code of the cuda build
// (EMBER_CUDA), the emulated one (cuda/emu/nccl.h, on emulated devices) otherwise. Depend on
// //cuda:nccl_lang.
#pragma once

#include "cuda/lang.h"

#if defined(__CUDACC__) || defined(EMBER_CUDA)
#include <nccl.h>
#else
#include "cuda/emu/nccl.h"
#endif
