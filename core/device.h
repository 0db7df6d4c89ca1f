// Where a tensor lives: the CPU, or CUDA device `index` (real, or emulated by cuda/emu).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace ember {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT: Device(kCPU)
  // Parses "cpu", "cuda", "cuda:1".
  static Device parse(const std::string& text);
  static constexpr Device cuda(int index) { return Device(DeviceType::CUDA, index); }

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;
  bool operator==(const Device& other) const { return type == other.type && index == other.index; }
  bool operator!=(const Device& other) const { return !(*this == other); }
};

constexpr DeviceType kCPU = DeviceType::CPU;
constexpr DeviceType kCUDA = DeviceType::CUDA;

std::ostream& operator<<(std::ostream& out, const Device& device);

}  // namespace ember
