// CUDA 13 dropped clockRate from cudaDeviceProp, so the real runtime is asked for the attribute;
// the emulator models no clock and reports none.
#include "cuda/device_properties.h"

#include "cuda/api.h"
#include "cuda/check.h"

namespace ember::cuda {

DeviceProperties device_properties(int device) {
  if (device < 0) device = current_device();
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cuda::device_properties");
  DeviceProperties out;
  out.name = prop.name;
  out.major = prop.major;
  out.minor = prop.minor;
  out.multi_processor_count = prop.multiProcessorCount;
  out.total_memory = prop.totalGlobalMem;
#if defined(EMBER_CUDA)
  check(cudaDeviceGetAttribute(&out.clock_khz, cudaDevAttrClockRate, device), "cuda::device_properties");
#else
  out.emulated = true;
#endif
  return out;
}

}  // namespace ember::cuda
