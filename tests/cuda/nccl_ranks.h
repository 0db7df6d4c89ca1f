// Test fixtures for NCCL on emulated devices: a device buffer that uploads and downloads bytes,
// `Ranks`, a communicator over devices 0..n-1 of one process (ncclCommInitAll) with a stream per
// rank, and what a test needs to start a peer process (the id in hex, the binary's path).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/nccl.h"

namespace ember::testing {

#define REQUIRE_CUDA(call)                                                        \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    INFO(#call << ": " << cudaGetErrorName(e_) << " " << cudaGetErrorString(e_)); \
    REQUIRE(e_ == cudaSuccess);                                                   \
  } while (0)

#define REQUIRE_NCCL(call)                                                              \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    INFO(#call << ": " << ncclGetErrorString(r_) << ": " << ncclGetLastError(nullptr)); \
    REQUIRE(r_ == ncclSuccess);                                                         \
  } while (0)

struct DeviceBuffer {
  int device;
  void* ptr = nullptr;
  size_t bytes;
  DeviceBuffer(int device_, size_t bytes_) : device(device_), bytes(bytes_) {
    REQUIRE_CUDA(cudaSetDevice(device));
    REQUIRE_CUDA(cudaMalloc(&ptr, std::max<size_t>(bytes, 1)));
  }
  DeviceBuffer(int device_, const std::vector<char>& data) : DeviceBuffer(device_, data.size()) { upload(data); }
  ~DeviceBuffer() {
    cudaSetDevice(device);
    cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* at(size_t offset) const { return static_cast<char*>(ptr) + offset; }
  void upload(const std::vector<char>& data) {
    REQUIRE_CUDA(cudaSetDevice(device));
    REQUIRE_CUDA(cudaMemcpy(ptr, data.data(), data.size(), cudaMemcpyHostToDevice));
  }
  std::vector<char> download() const {
    std::vector<char> data(bytes);
    REQUIRE_CUDA(cudaSetDevice(device));
    REQUIRE_CUDA(cudaMemcpy(data.data(), ptr, bytes, cudaMemcpyDeviceToHost));
    return data;
  }
};

class Ranks {
 public:
  explicit Ranks(int n) : comms(static_cast<size_t>(n)), streams(static_cast<size_t>(n)) {
    REQUIRE_NCCL(ncclCommInitAll(comms.data(), n, nullptr));
    for (int r = 0; r < n; ++r) {
      REQUIRE_CUDA(cudaSetDevice(r));
      REQUIRE_CUDA(cudaStreamCreate(&streams[static_cast<size_t>(r)]));
    }
  }
  ~Ranks() {
    // A failed test may leave work pending that would hold ncclCommDestroy forever.
    for (size_t r = 0; r < comms.size(); ++r) {
      if (cudaStreamQuery(streams[r]) == cudaErrorNotReady)
        ncclCommAbort(comms[r]);
      else
        ncclCommDestroy(comms[r]);
    }
    for (cudaStream_t s : streams) cudaStreamDestroy(s);
  }
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  int size() const { return static_cast<int>(comms.size()); }
  ncclComm_t comm(int r) const { return comms[static_cast<size_t>(r)]; }
  cudaStream_t stream(int r) const { return streams[static_cast<size_t>(r)]; }
  // After ncclCommAbort(comm(r)): the handle is gone.
  void forget(int r) { comms[static_cast<size_t>(r)] = nullptr; }
  void synchronize() const {
    for (cudaStream_t s : streams) REQUIRE_CUDA(cudaStreamSynchronize(s));
  }

 private:
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
};

// The id as nccl_peer_main takes it.
inline std::string id_hex(const ncclUniqueId& id) {
  std::string hex;
  for (char c : id.internal) {
    char byte[3];
    std::snprintf(byte, sizeof(byte), "%02x", static_cast<unsigned char>(c));
    hex += byte;
  }
  return hex;
}

// A binary of tests/cuda in the test's runfiles.
inline std::string runfile(const char* name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  REQUIRE(srcdir != nullptr);
  return std::string(srcdir) + "/ember/tests/cuda/" + name;
}

}  // namespace ember::testing
