// Programs that must die, for emu_fidelity_test: each mode does one thing a real GPU would not
// allow, and the emulator must end the process with a message saying what.
//   host-read      host code dereferences a cuda:0 pointer
//   tensor-read    host code dereferences a cuda:0 tensor's data_ptr
//   tensor-read-during-kernel  the same while a kernel runs on cuda:0
//   cross-device   a kernel on cuda:0 reads cuda:1 memory without peer access
//   cross-device-during-kernel  the same while a kernel runs on cuda:1 (then, after a
//                  cudaDeviceReset, a correct kernel on cuda:0 fails too: its runner has ended)
//   pageable-read  a kernel on cuda:0 reads pageable host memory allocated after the first CUDA call
//   runner-killed  cuda:0's kernel runner is killed while a kernel runs there
//   forked-child   a child forked after the first CUDA call launches a kernel
//   overrun        a kernel writes one float past a cudaMalloc block (AddressSanitizer builds only)
//   use-after-free a kernel reads a freed cudaMalloc block (AddressSanitizer builds only)
// Modes whose failure is reported print the error's name and the emulator's message, and exit 3.
//   shared-overrun a kernel writes past its dynamic shared memory
//   stack-after-return  a kernel reads a local of a returned device function, after 20,000
//                  blocks have run on the same fiber stacks (AddressSanitizer builds only)
//   tensor-overrun a kernel stores one float past a cuda:0 tensor of 1000 (the caching
//                  allocator's), in checking mode
//   malloc-overrun the same past a raw cudaMalloc of 1000 floats, in checking mode
//   copy-overrun   cudaMemcpy of 1001 floats into that tensor of 1000, in checking mode
// These three report through the next synchronisation (exit 3) or, under AddressSanitizer, the
// kernels' two die at the store (in cuda:0's runner).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/ember_core.h"
#include "cuda/emu/check_mode.h"
#include "cuda/emu/emu.h"
#include "cuda/emu/runner.h"
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

// A kernel that runs on the current device until release_device(): *running is set once it does.
int* running = nullptr;
int* release = nullptr;

void hold_current_device() {
  cudaMallocHost(reinterpret_cast<void**>(&running), sizeof(int));
  cudaMallocHost(reinterpret_cast<void**>(&release), sizeof(int));
  *running = *release = 0;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  ember::testing::hold_device(running, release, stream);
  while (__atomic_load_n(running, __ATOMIC_SEQ_CST) == 0) std::this_thread::yield();
}

void release_device() { __atomic_store_n(release, 1, __ATOMIC_SEQ_CST); }

// A kernel's failure, reported by the next synchronisation: printed, and the exit status.
int report_failure() {
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return 0;
  std::fprintf(stderr, "%s: %s\n", cudaGetErrorName(e), ember::emu::failure_message().c_str());
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
  } else if (mode == "tensor-read-during-kernel") {
    ember::Tensor t = ember::ones({16}, ember::TensorOptions(ember::kFloat32).device(ember::Device::cuda(0)));
    cudaDeviceSynchronize();
    hold_current_device();
    std::printf("read %f\n", static_cast<double>(static_cast<const float*>(t.data_ptr())[3]));  // must not get here
    release_device();
  } else if (mode == "cross-device") {
    ember::testing::scale(b, a, 2.0f, 1024, nullptr);  // on cuda:0, reading cuda:1's b
    if (int status = report_failure()) return status;
  } else if (mode == "cross-device-during-kernel") {
    cudaSetDevice(1);
    hold_current_device();
    cudaSetDevice(0);
    ember::testing::scale(b, a, 2.0f, 1024, nullptr);  // on cuda:0, reading cuda:1's b
    const int status = report_failure();
    release_device();
    if (status == 0) return 0;
    cudaDeviceReset();
    cudaMalloc(reinterpret_cast<void**>(&a), 1024 * sizeof(float));
    ember::testing::scale(a, a, 2.0f, 1024, nullptr);
    std::fprintf(stderr, "after cudaDeviceReset: ");
    if (report_failure() == 0) std::fprintf(stderr, "ran\n");
    return status;
  } else if (mode == "pageable-read") {
    std::vector<float> host(1 << 20, 1.0f);  // 4 MB: mapped on its own, after the runners started
    ember::testing::scale(host.data(), a, 2.0f, 1024, nullptr);
    if (int status = report_failure()) return status;
  } else if (mode == "overrun") {
    ember::testing::scale(a, a, 2.0f, 1025, nullptr);  // a holds 1024 floats
    if (int status = report_failure()) return status;
  } else if (mode == "use-after-free") {
    float* freed = nullptr;
    cudaMalloc(reinterpret_cast<void**>(&freed), 1024 * sizeof(float));
    cudaFree(freed);
    ember::testing::scale(freed, a, 2.0f, 1024, nullptr);
    if (int status = report_failure()) return status;
  } else if (mode == "runner-killed") {
    hold_current_device();
    ::kill(ember::emu::runner_pid(0), SIGKILL);
    if (int status = report_failure()) return status;
  } else if (mode == "forked-child") {
    const pid_t child = ::fork();
    if (child == 0) {
      ember::testing::scale(a, a, 2.0f, 1024, nullptr);
      ::_exit(report_failure());
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ember::testing::scale(a, a, 2.0f, 1024, nullptr);  // the parent's devices still work
    if (report_failure() != 0) return 4;
    std::fprintf(stderr, "the parent's launch ran\n");
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) return WEXITSTATUS(status);
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
    if (int status = report_failure()) return status;
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
    const cudaError_t e =
        cudaMemcpy(x.data_ptr<float>(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
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
