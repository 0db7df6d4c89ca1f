// Operand checks for the fused optimizer updates, shared by every backend.
#include "core/fused_update.h"

#include "core/device_check.h"
#include "core/shape.h"

namespace ember {

namespace {

// Kernels walk raw buffers element by element, so every operand must be one dense block of the
// parameter's dtype and size, on its device.
void check_operand(const char* op, const Tensor& param, const Tensor& t, const char* what) {
  EMBER_CHECK(t.defined(), op, ": ", what, " is undefined");
  check_devices(op, param.device(), {{t, what}});
  EMBER_CHECK(t.dtype() == param.dtype(), op, ": expected ", what, " of dtype ", dtype_name(param.dtype()), ", got ",
              dtype_name(t.dtype()));
  EMBER_CHECK(t.sizes() == param.sizes(), op, ": expected ", what, " of shape ", shape_str(param.sizes()), ", got ",
              shape_str(t.sizes()));
  EMBER_CHECK(t.is_contiguous(), op, ": expected a contiguous ", what, ", got strides ", shape_str(t.strides()));
}

void check_param(const char* op, const Tensor& param) {
  EMBER_CHECK(param.defined(), op, ": param is undefined");
  EMBER_CHECK(param.dtype() == kFloat32 || param.dtype() == kFloat64, op, ": expected a float32 or float64 param, got ",
              dtype_name(param.dtype()));
  EMBER_CHECK(param.is_contiguous(), op, ": expected a contiguous param, got strides ", shape_str(param.strides()));
}

}  // namespace

void fused_sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                       const SgdUpdateArgs& args) {
  const char* op = "fused_sgd_update_";
  check_param(op, param);
  check_operand(op, param, grad, "grad");
  if (args.momentum != 0.0) check_operand(op, param, momentum_buffer, "momentum_buffer");
  const KernelTable& table = kernels_for(param.device(), op);
  table.sgd_update(param, grad, args.momentum != 0.0 ? momentum_buffer : Tensor(), args);
  param.bump_version();
  if (args.momentum != 0.0) momentum_buffer.bump_version();
}

void fused_adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamUpdateArgs& args) {
  const char* op = "fused_adam_update_";
  check_param(op, param);
  check_operand(op, param, grad, "grad");
  check_operand(op, param, exp_avg, "exp_avg");
  check_operand(op, param, exp_avg_sq, "exp_avg_sq");
  if (args.amsgrad) check_operand(op, param, max_exp_avg_sq, "max_exp_avg_sq");
  EMBER_CHECK(args.step >= 1, op, ": expected step >= 1 (it counts this update), got ", args.step);
  const KernelTable& table = kernels_for(param.device(), op);
  table.adam_update(param, grad, exp_avg, exp_avg_sq, args.amsgrad ? max_exp_avg_sq : Tensor(), args);
  param.bump_version();
  exp_avg.bump_version();
  exp_avg_sq.bump_version();
  if (args.amsgrad) max_exp_avg_sq.bump_version();
}

}  // namespace ember
