// The device a test source runs its cases on, so that one source serves every backend: the CPU,
// unless its BUILD target names another with local_defines = ["EMBER_TEST_DEVICE=cuda:0"] (a
// cuda_test, which also links //cuda). Include it in test sources only: the value is per target.
#pragma once

#include "core/device.h"

// A target that names a device is a cuda_test, linked with //cuda.
#ifdef EMBER_TEST_DEVICE
#include "cuda/conv.h"
#define EMBER_TEST_ON_CUDA 1
#endif

#ifndef EMBER_TEST_DEVICE
#define EMBER_TEST_DEVICE cpu
#endif

// The define is a bare token sequence because a quoted one would need shell escapes in BUILD.
#define EMBER_TEST_STRINGIFY_IMPL(text) #text
#define EMBER_TEST_STRINGIFY(text) EMBER_TEST_STRINGIFY_IMPL(text)
#define EMBER_TEST_DEVICE_NAME EMBER_TEST_STRINGIFY(EMBER_TEST_DEVICE)

namespace ember::test {

// Reference data is exact float32 (PyTorch on a CPU), so on a GPU the convolutions are too: cuDNN's
// default TF32 would miss the tests' rtol 1e-4.
inline const Device kTestDevice = [] {
#ifdef EMBER_TEST_ON_CUDA
  cuda::set_cudnn_allow_tf32(false);
#endif
  return Device::parse(EMBER_TEST_DEVICE_NAME);
}();

}  // namespace ember::test
