// Programs that must die, for emu_fidelity_test: each mode does one thing a real GPU would not
// allow, and the emulator must end the process with a message saying what.
//   host-read      host code dereferences a cuda:0 pointer
//   tensor-read    host code dereferences a cuda:0 tensor's data_ptr
//   cross-device   a kernel on cuda:0 reads cuda:1 memory without peer access
//   shared-overrun a kernel writes past its dynamic shared memory
//   stack-after-return  a kernel reads a local of a returned device function, after 20,000
//                  blocks have run on the same fiber stacks (AddressSanitizer builds only)
#include <cstdio>
#include <cstring>
#include <string>

#include "core/ember_core.h"
#include "cuda/emu/emu.h"
#include "tests/cuda/test_kernels.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  ember::emu::set_device_count(2);
  float* a = nullptr;
  float* b = nullptr;
  cudaSetDevice(1);
  cudaMalloc(reinterpret_cast<void**>(&b), 1024 * sizeof(float));
  cudaSetDevice(0);
  cudaMalloc(reinterpret_cast<void**>(&a), 1024 * sizeof(float));
  cudaMemset(a, 0, 1024 * sizeof(float));
  if (mode == "host-read") {
    std::printf("read %f\n", static_cast<double>(a[3]));  // must not get here
  } else if (mode == "tensor-read") {
    ember::Tensor t = ember::ones({16}, ember::TensorOptions(ember::kFloat32).device(ember::Device::cuda(0)));
    cudaDeviceSynchronize();
    std::printf("read %f\n", static_cast<double>(static_cast<const float*>(t.data_ptr())[3]));  // must not get here
  } else if (mode == "cross-device") {
    ember::testing::scale(b, a, 2.0f, 1024, nullptr);  // on cuda:0, reading cuda:1's b
    cudaDeviceSynchronize();
  } else if (mode == "shared-overrun") {
    ember::testing::reverse_chunks(a, a, 256, 256, 256, true, nullptr);
    if (cudaDeviceSynchronize() != cudaSuccess) {
      std::fprintf(stderr, "%s\n", ember::emu::failure_message().c_str());
      return 3;
    }
  } else if (mode == "stack-after-return") {
    // Fibers reuse their stack's fake stack: detection must hold on the 20,001st block too.
    const int n = 1024 * 256;  // 1024 blocks of 256 threads
    float* big = nullptr;
    cudaMalloc(reinterpret_cast<void**>(&big), n * sizeof(float));
    for (int i = 0; i < 20; ++i) ember::testing::scale(big, big, 1.0f, n, nullptr);
    int** slots = nullptr;
    int* out = nullptr;
    cudaMalloc(reinterpret_cast<void**>(&slots), 64 * sizeof(int*));
    cudaMalloc(reinterpret_cast<void**>(&out), 64 * sizeof(int));
    ember::testing::read_after_return(slots, out, 64, nullptr);
    cudaDeviceSynchronize();
  } else {
    std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  std::printf("survived\n");
  return 0;
}
