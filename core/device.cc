// Device names in PyTorch's spelling: "cpu", "cuda:0".
#include "core/device.h"

#include <cstdlib>

#include "core/error.h"

namespace ember {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return Device(kCPU);
  if (text == "cuda") return Device(kCUDA, 0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    char* end = nullptr;
    long index = std::strtol(text.c_str() + 5, &end, 10);
    if (end && *end == '\0' && index >= 0 && index < 1024) return Device(kCUDA, static_cast<int>(index));
  }
  EMBER_FAIL("Device::parse: expected \"cpu\", \"cuda\" or \"cuda:N\", got \"", text, "\"");
}

std::string Device::str() const {
  if (type == kCPU) return "cpu";
  return "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& out, const Device& device) { return out << device.str(); }

}  // namespace ember
