// machine_description() (cpu_info.h), and its registration with core/kernel_select.h.
#include "core/cpu/cpu_info.h"

#include <cstdlib>
#include <fstream>

#include "core/kernel_select.h"

namespace ember::cpu {

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

const bool registered = (kernel_select::set_machine_description(&machine_description), true);

}  // namespace

std::string machine_description() {
  std::string model = "unknown-cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(colon + 2);
      break;
    }
  }
  std::string caches;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    const std::string level = read_first_line(dir + "/level"), type = read_first_line(dir + "/type");
    const std::string size = read_first_line(dir + "/size");
    if (level.empty()) break;
    caches += " L" + level + (type == "Data" ? "d" : type == "Instruction" ? "i" : "") + "=" + size;
  }
  // A cap on the CPU backend's instruction set (isa.h) changes which kernels exist.
  const char* isa = std::getenv("EMBER_CPU_ISA");
  return model + caches + (isa != nullptr && *isa != '\0' ? std::string(" isa=") + isa : "");
}

}  // namespace ember::cpu
