// Fused optimizer updates: check the operands, then run the device's kernel (see SgdUpdateArgs and
// AdamUpdateArgs in backend.h for the math). Not differentiable; they bump param's version counter.
//
//   ember::fused_sgd_update_(w, w.grad(), buf, {.lr = 0.1, .momentum = 0.9, .first_step = step == 0});
#pragma once

#include "core/backend.h"
#include "core/tensor.h"

namespace ember {

// momentum_buffer is required when args.momentum != 0 and ignored otherwise.
void fused_sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                       const SgdUpdateArgs& args);
// max_exp_avg_sq is required when args.amsgrad and ignored otherwise.
void fused_adam_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamUpdateArgs& args);

}  // namespace ember
