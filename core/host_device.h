// Marks code that both backends compile: plain C++ for the CPU (and for cuda/emu, which runs CUDA
// sources on the host), __host__ __device__ under nvcc. core includes no CUDA header; nvcc
// defines __CUDACC__ and declares the qualifiers itself.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define EMBER_HOST_DEVICE __host__ __device__
#else
#define EMBER_HOST_DEVICE
#endif

namespace ember {

// Bit casts between float and its word: memcpy on the host, the register move on a GPU.
EMBER_HOST_DEVICE inline uint32_t float_to_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  return word;
#endif
}

EMBER_HOST_DEVICE inline float bits_to_float(uint32_t word) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(word);
#else
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
#endif
}

}  // namespace ember
