// The emulated devices: their heaps, default streams, peer access and sticky errors; and the
// pinned host memory that every device's kernels reach.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/emu/cuda_runtime.h"
#include "cuda/emu/memory.h"
#include "cuda/emu/stream.h"

namespace ember::emu {

struct Device {
  int index = 0;
  std::unique_ptr<DeviceHeap> heap;
  std::unique_ptr<Stream> default_stream;
  std::vector<Stream*> streams;   // created with cudaStreamCreate (guarded by mutex)
  std::vector<bool> peer_access;  // peer_access[p]: this device's kernels may touch p's memory
  std::mutex mutex;
  cudaError_t sticky = cudaSuccess;  // a failed kernel or copy: every later sync reports it
  std::string failure;
};

// Every device (created on first use); throws nothing: an empty list means no devices.
std::vector<Device*>& devices();
Device* device_at(int index);  // null when out of range
// cudaMallocHost's memory, shared with the runners at the same addresses.
DeviceHeap& pinned_memory();
// The first failure on `device` becomes its sticky error (`code`) and failure_message().
void record_failure(int device, const std::string& what, cudaError_t code = cudaErrorLaunchFailure);

}  // namespace ember::emu
