// Puts the convolution choices a test changes back as the suite runs them: kernel_select in
// heuristic mode with nothing forced or decided, deterministic algorithms only, TF32 allowed.
#pragma once

#include "core/kernel_select.h"
#include "cuda/conv.h"

namespace ember::testing {

struct ConvChoiceGuard {
  ConvChoiceGuard() = default;
  ConvChoiceGuard(const ConvChoiceGuard&) = delete;
  ConvChoiceGuard& operator=(const ConvChoiceGuard&) = delete;
  ~ConvChoiceGuard() {
    kernel_select::set_mode(kernel_select::Mode::Heuristic);
    kernel_select::force("");
    kernel_select::reset();
    cuda::set_conv_deterministic(true);
    cuda::set_cudnn_allow_tf32(true);
  }
};

}  // namespace ember::testing
