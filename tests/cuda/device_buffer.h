// What the CUDA tests share: REQUIRE_CUDA, which names the call and CUDA's error, and a device array
// that frees itself, written and read by cudaMemcpy.
#pragma once

#include <catch2/catch.hpp>

#include <vector>

#include "cuda/lang.h"

#define REQUIRE_CUDA(call)                                                        \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    INFO(#call << ": " << cudaGetErrorName(e_) << " " << cudaGetErrorString(e_)); \
    REQUIRE(e_ == cudaSuccess);                                                   \
  } while (0)

namespace ember::testing {

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t count) : n(count) {
    REQUIRE_CUDA(cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { write(host); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void write(const std::vector<T>& host) {
    REQUIRE(host.size() == n);
    REQUIRE_CUDA(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> read() const {
    std::vector<T> out(n);
    REQUIRE_CUDA(cudaMemcpy(out.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }
};

}  // namespace ember::testing
