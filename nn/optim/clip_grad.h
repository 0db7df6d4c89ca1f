// Gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_: in place on every
// parameter's .grad; parameters without one are ignored.
//
//   double norm = ember::optim::clip_grad_norm_(optimizer.parameters(), 1.0);   // before step()
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ember::optim {

// Scales all grads by min(1, max_norm / (total_norm + 1e-6)), where total_norm is the norm_type norm
// (inf: the largest magnitude) of all grads seen as one vector, computed in their dtype. Returns
// total_norm (0 when no grad is defined). With error_if_nonfinite, a NaN or infinite total raises
// instead of scaling.
double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
// Clamps every grad element to [-clip_value, clip_value]; clip_value must be >= 0.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace ember::optim
