// The one device check behind every op's entry (core/device_check.h).
#include "core/device_check.h"

namespace ember {

namespace {

bool is_cpu_scalar(const Tensor& t) { return t.device().is_cpu() && t.dim() == 0; }

}  // namespace

void device_mismatch(const char* op, Device expected, Device got, const std::string& which) {
  EMBER_FAIL(op, ": expected all tensors on ", expected.str(), ", got ", got.str(), " for ", which);
}

void check_devices(const char* op, Device device, std::initializer_list<TensorArg> args, CpuScalars scalars) {
  int argument = 0;
  for (const TensorArg& arg : args) {
    ++argument;
    const Tensor& t = *arg.tensor;
    if (!t.defined() || t.device() == device) continue;
    if (scalars == CpuScalars::Allowed && is_cpu_scalar(t)) continue;
    device_mismatch(
        op, device, t.device(),
        arg.name != nullptr ? std::string("argument '") + arg.name + "'" : "argument " + std::to_string(argument));
  }
}

Device common_device(const char* op, std::initializer_list<TensorArg> args, CpuScalars scalars) {
  Device device(kCPU);
  for (const TensorArg& arg : args) {
    const Tensor& t = *arg.tensor;
    if (t.defined() && !(scalars == CpuScalars::Allowed && is_cpu_scalar(t))) {
      device = t.device();
      break;
    }
  }
  check_devices(op, device, args, scalars);
  return device;
}

}  // namespace ember
