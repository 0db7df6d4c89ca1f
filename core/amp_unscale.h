// amp_unscale_: the gradient scaler's work on the devices (nn/amp/grad_scaler.h). Multiplies
// gradients in place by 1/scale and checks them for infs and NaNs in the same pass: one kernel call
// per device and no host read, so that the scaler reads one flag per step, not one per parameter.
//
//   Tensor inv_scale = ember::full({}, 1.0f / 65536.0f);         // on the CPU: read at the call
//   std::vector<Tensor> found = ember::amp_unscale_(grads, inv_scale);
//   bool skip = found[0].item<float>() != 0;                      // the host read, once
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ember {

// Multiplies every grad in place by inv_scale and returns, for each device the grads are on (in
// the order they first appear), a one-element float32 tensor on that device: 1 when any of its
// grads held an inf or a NaN, else 0. Grads: defined, dense, float32, float64, bfloat16 or float16.
// inv_scale: one float32 element on the CPU, or on a device (copied to the others). Not
// differentiable; bumps each grad's version.
std::vector<Tensor> amp_unscale_(const std::vector<Tensor>& grads, const Tensor& inv_scale);

}  // namespace ember
