// What a CUDA device is (torch.cuda.get_device_properties), for benchmarks that relate a rate to
// the device's peak: its name, SM count, compute capability, memory and peak SM clock.
//
//   ember::cuda::DeviceProperties p = ember::cuda::device_properties(0);
//   std::printf("%s, %d SMs at %.0f MHz\n", p.name.c_str(), p.multi_processor_count, p.clock_khz / 1e3);
#pragma once

#include <cstddef>
#include <string>

namespace ember::cuda {

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;  // compute capability: 9.0 for H100 and H200
  int multi_processor_count = 0;
  // The SM clock the device may boost to; 0 on emulated devices, which have no clock.
  int clock_khz = 0;
  size_t total_memory = 0;
  bool emulated = false;  // a cuda/emu device: rates measure the CPU, not a GPU
};

// `device` -1: the current device.
DeviceProperties device_properties(int device = -1);

}  // namespace ember::cuda
