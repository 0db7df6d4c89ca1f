// Programs that must die, for emu_fidelity_test: each mode does one thing a real GPU would not
// allow, and the emulator must end the process with a message saying what.
//   host-read      host code dereferences a cuda:0 pointer
//   tensor-read    host code dereferences a cuda:0 tensor's data_ptr
//   cross-device   a kernel on cuda:0 reads cuda:1 memory without peer access
//   shared-overrun a kernel writes past its dynamic shared memory
//   stack-after-return  a kernel reads a local of a returned device function, after 20,000
//                  blocks have run on the same fiber stacks (AddressSanitizer builds only)
//   tensor-overrun a kernel stores one float past a cuda:0 tensor of 1000 (the caching
//                  allocator's), in checking mode
//   malloc-overrun the same past a raw cudaMalloc of 1000 floats, in checking mode
//   copy-overrun   cudaMemcpy of 1001 floats into that tensor of 1000, in checking mode
// The last two report through the next synchronisation (exit 3, printing cudaGetErrorString's
// text) or, under AddressSanitizer, die at the store.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/ember_core.h"
#include "cuda/emu/check_mode.h"
#include "cuda/emu/emu.h"
#include "tests/cuda/test_kernels.h"

namespace {

// Named in the overrun reports as where the allocation was made.
__attribute__((noinline)) ember::Tensor tensor_of_1000_floats(float value) {
  return ember::full({1000}, value, ember::TensorOptions(ember::kFloat32).device(ember::Device::cuda(0)));
}

__attribute__((noinline)) float* cuda_malloc_1000_floats() {
  float* p = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&p), 1000 * sizeof(float));
  return p;
}

int report_failure() {
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return 0;
  std::fprintf(stderr, "%s\n", cudaGetErrorString(e));
  return 3;
}

}  // namespace

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
  } else if (mode == "tensor-overrun") {
    ember::emu::set_checking(true);
    ember::Tensor x = tensor_of_1000_floats(0.0f), neighbour = tensor_of_1000_floats(1.0f);
    ember::testing::fill(x.data_ptr<float>(), 1000, 7.0f, true, nullptr);
    if (int status = report_failure(); status != 0) return status;
  } else if (mode == "malloc-overrun") {
    ember::emu::set_checking(true);
    float* x = cuda_malloc_1000_floats();
    ember::testing::fill(x, 1000, 7.0f, true, nullptr);
    if (int status = report_failure(); status != 0) return status;
  } else if (mode == "copy-overrun") {
    ember::emu::set_checking(true);
    ember::Tensor x = tensor_of_1000_floats(0.0f);
    std::vector<float> host(1001, 7.0f);
    const cudaError_t e = cudaMemcpy(x.data_ptr<float>(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      std::fprintf(stderr, "%s\n", cudaGetErrorString(e));
      return 3;
    }
  } else {
    std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  std::printf("survived\n");
  return 0;
}
