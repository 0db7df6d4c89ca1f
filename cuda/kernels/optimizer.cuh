// The fused SGD and Adam/AdamW updates (core/optimizer_math.h), one pass over param, grad and state.
#pragma once

#include "core/backend.h"

namespace ember::cuda {

void sgd_update_kernel(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                       const SgdUpdateArgs& args);
void adam_update_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamUpdateArgs& args);

}  // namespace ember::cuda
