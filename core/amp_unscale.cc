// The checks of amp_unscale_ and its grouping by device; the kernels are the backends'.
#include "core/amp_unscale.h"

#include "core/backend.h"
#include "core/factory.h"
#include "core/shape.h"

namespace ember {

namespace {

bool unscalable(DType dtype) {
  return dtype == kFloat32 || dtype == kFloat64 || dtype == kBFloat16 || dtype == kFloat16;
}

}  // namespace

std::vector<Tensor> amp_unscale_(const std::vector<Tensor>& grads, const Tensor& inv_scale) {
  const char* op = "amp_unscale_";
  EMBER_CHECK(inv_scale.defined(), op, ": inv_scale is undefined");
  EMBER_CHECK(inv_scale.numel() == 1 && inv_scale.dtype() == kFloat32, op,
              ": expected inv_scale to be one float32 element, got ", dtype_name(inv_scale.dtype()), " of shape ",
              shape_str(inv_scale.sizes()));
  std::vector<Device> devices;
  std::vector<std::vector<Tensor>> groups;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& grad = grads[i];
    EMBER_CHECK(grad.defined(), op, ": grad ", i, " is undefined");
    EMBER_CHECK(unscalable(grad.dtype()), op, ": expected grad ", i,
                " to be float32, float64, bfloat16 or float16, got ", dtype_name(grad.dtype()));
    // The kernels walk each grad's block of memory, so its elements must fill one.
    EMBER_CHECK(is_dense(grad), op, ": expected grad ", i, " to be dense (contiguous in some order of its dims), got ",
                shape_str(grad.sizes()), " with strides ", shape_str(grad.strides()));
    size_t g = 0;
    while (g < devices.size() && devices[g] != grad.device()) ++g;
    if (g == devices.size()) {
      devices.push_back(grad.device());
      groups.emplace_back();
    }
    groups[g].push_back(grad);
  }
  std::vector<Tensor> found_inf;
  for (size_t g = 0; g < devices.size(); ++g) {
    const Device device = devices[g];
    const KernelTable& table = kernels_for(device, op);
    // A CPU value is read by the kernel call itself; a device's is copied to where the grads are.
    const Tensor inv = inv_scale.device().is_cpu() || inv_scale.device() == device ? inv_scale : inv_scale.to(device);
    Tensor found = zeros({1}, TensorOptions(kFloat32).device(device));
    table.amp_unscale(groups[g], inv, found);
    for (const Tensor& grad : groups[g]) grad.bump_version();
    found_inf.push_back(found);
  }
  return found_inf;
}

}  // namespace ember
