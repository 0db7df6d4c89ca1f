// The emulated devices: their heaps, default streams, peer access and sticky errors.
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
  std::vector<Stream*> streams;  // created with cudaStreamCreate (guarded by mutex)
  std::vector<bool> peer_access;  // peer_access[p]: this device's kernels may touch p's memory
  std::mutex mutex;
  cudaError_t sticky = cudaSuccess;  // a failed kernel or copy: every later sync reports it
  std::string failure;
};

// Every device (created on first use); throws nothing: an empty list means no devices.
std::vector<Device*>& devices();
Device* device_at(int index);  // null when out of range
// The heaps an operation on `device` may touch: its own and those of its enabled peers.
std::vector<DeviceHeap*> reachable_heaps(int device);
void record_failure(int device, const std::string& what);

}  // namespace ember::emu
