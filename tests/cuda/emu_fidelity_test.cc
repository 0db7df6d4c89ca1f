// The emulator's promise: what would break on a GPU breaks here too. A missing __syncthreads gives
// wrong results (threads run out of natural order), a divergent barrier or an incomplete warp
// operation is an error naming the kernel and the block, host code cannot read device memory,
// kernels cannot reach another device's memory without peer access, a stream's work is never
// done inline (the delay mode exposes a missing synchronisation), and memory runs out at the
// configured capacity. In checking mode (EMBER_EMU_CHECK=1) a store one element past a tensor or
// a cudaMalloc allocation is reported naming the kernel and the allocation; cudaGetErrorString
// and cuda::check carry the emulator's account of a failure.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/ember_core.h"
#include "cuda/check.h"
#include "cuda/emu/check_mode.h"
#include "cuda/emu/emu.h"
#include "tests/cuda/test_kernels.h"

using namespace ember;
using namespace ember::testing;

namespace {

#define REQUIRE_CUDA(call) REQUIRE((call) == cudaSuccess)

struct Buffer {
  float* ptr = nullptr;
  size_t n;
  explicit Buffer(size_t count) : n(count) {
    REQUIRE_CUDA(cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(float)));
  }
  ~Buffer() { cudaFree(ptr); }
  void write(const std::vector<float>& v) {
    REQUIRE_CUDA(cudaMemcpy(ptr, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  std::vector<float> read() const {
    std::vector<float> v(n);
    REQUIRE_CUDA(cudaMemcpy(v.data(), ptr, n * sizeof(float), cudaMemcpyDeviceToHost));
    return v;
  }
};

// A kernel's failure: the error the next synchronisation returns, and the emulator's description.
std::string failure_after_sync() {
  cudaError_t e = cudaDeviceSynchronize();
  REQUIRE(e == cudaErrorLaunchFailure);
  cudaGetLastError();
  std::string message = emu::failure_message();
  REQUIRE_CUDA(cudaDeviceReset());  // clears the sticky error for the next case
  return message;
}

struct Death {
  int status;
  std::string output;
};

Death run_death_main(const std::string& mode) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  REQUIRE(srcdir != nullptr);
  std::string command = std::string(srcdir) + "/ember/tests/cuda/emu_death_main " + mode + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  std::array<char, 512> chunk;
  while (size_t got = std::fread(chunk.data(), 1, chunk.size(), pipe)) output.append(chunk.data(), got);
  return {::pclose(pipe), output};
}

}  // namespace

TEST_CASE("a missing __syncthreads gives wrong results unless the threads run in natural order", "[emu]") {
  const int n = 512, threads = 128;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  Buffer in(n), out(n);
  in.write(x);
  auto correct = [&](bool with_barrier) {
    REQUIRE_CUDA(shift_in_block(in.ptr, out.ptr, n, threads, with_barrier, nullptr));
    std::vector<float> got = out.read();
    for (int i = 0; i < n; ++i)
      if (got[static_cast<size_t>(i)] != (i % threads == 0 ? 0.0f : x[static_cast<size_t>(i - 1)])) return false;
    return true;
  };
  const bool checking_before = emu::checking();
  emu::set_checking(false);  // checking mode reports the race instead (racecheck_test)
  for (emu::ThreadOrder order :
       {emu::ThreadOrder::Natural, emu::ThreadOrder::Reversed, emu::ThreadOrder::Shuffled, emu::ThreadOrder::Random}) {
    emu::set_thread_order(order);
    INFO("thread order " << static_cast<int>(order));
    CHECK(correct(true));
    // In natural order each thread's neighbour has stored its value already: the bug hides.
    CHECK(correct(false) == (order == emu::ThreadOrder::Natural));
  }
  emu::set_thread_order(emu::ThreadOrder::Shuffled);
  emu::set_checking(checking_before);
}

TEST_CASE("a divergent barrier is an error naming the kernel and the block", "[emu]") {
  REQUIRE_CUDA(divergent_barrier(64, 16, false, nullptr));
  std::string message = failure_after_sync();
  CHECK_THAT(message, Catch::Contains("kernel 'divergent_kernel' on cuda:0, block (") &&
                          Catch::Contains("divergent barrier: 16 of 64 threads wait at __syncthreads at") &&
                          Catch::Contains("but 48 exited without reaching it"));

  REQUIRE_CUDA(divergent_barrier(64, 16, true, nullptr));
  message = failure_after_sync();
  CHECK_THAT(message, Catch::Contains("divergent barrier: thread (") && Catch::Contains("test_kernels.cu:"));

  // Every thread arriving is fine, and the device works again after the reset.
  REQUIRE_CUDA(divergent_barrier(64, 64, false, nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());
}

TEST_CASE("a warp operation whose mask names lanes that exited is an error", "[emu]") {
  {
    Buffer out(32);
    REQUIRE_CUDA(shuffle_with_missing_lanes(reinterpret_cast<int*>(out.ptr), nullptr));
    REQUIRE(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  }  // freed before the reset, which frees every allocation of the device
  std::string message = failure_after_sync();
  CHECK_THAT(message, Catch::Contains("kernel 'missing_lanes_kernel' on cuda:0, block (0, 0, 0): __shfl_down_sync") &&
                          Catch::Contains("with mask 0xffffffff names lane 16") &&
                          Catch::Contains("which exited without reaching it"));
}

TEST_CASE("cudaGetErrorString and cuda::check give the emulator's account of a failure, once", "[emu]") {
  REQUIRE_CUDA(divergent_barrier(64, 16, false, nullptr));
  const cudaError_t e = cudaDeviceSynchronize();
  REQUIRE(e == cudaErrorLaunchFailure);
  cudaGetLastError();
  CHECK_THAT(std::string(cudaGetErrorString(e)),
             Catch::StartsWith("unspecified launch failure: kernel 'divergent_kernel' on cuda:0, block (") &&
                 Catch::Contains("divergent barrier: 16 of 64 threads wait at __syncthreads at"));
  // A code the failure did not set keeps CUDA's text alone.
  CHECK(std::string(cudaGetErrorString(cudaErrorInvalidValue)) == "invalid argument");
  std::string raised;
  try {
    cuda::check(e, "my_op");
  } catch (const Error& error) {
    raised = error.what();
  }
  CHECK_THAT(raised, Catch::StartsWith("my_op: CUDA error on cuda:0: cudaErrorLaunchFailure: unspecified launch "
                                       "failure: kernel 'divergent_kernel' on cuda:0, block ("));
  CHECK(raised.find("divergent barrier") == raised.rfind("divergent barrier"));  // said once
  REQUIRE_CUDA(cudaDeviceReset());
  CHECK(std::string(cudaGetErrorString(cudaErrorLaunchFailure)) == "unspecified launch failure");
}

TEST_CASE("host code reading device memory (a raw pointer, a cuda:0 tensor's data) dies with a message", "[emu]") {
  for (const char* mode : {"host-read", "tensor-read"}) {
    Death d = run_death_main(mode);
    INFO(mode << ": " << d.output);
    CHECK(d.status != 0);
    CHECK_THAT(d.output, Catch::Contains("cuda emulator: host code accessed device memory of cuda:0 at"));
    CHECK_THAT(d.output, !Catch::Contains("read "));
  }
}

// A kernel that runs on `stream`'s device until the object dies (pinned flags the host sets).
class DeviceHeld {
 public:
  explicit DeviceHeld(cudaStream_t stream) : stream_(stream) {
    REQUIRE_CUDA(cudaMallocHost(reinterpret_cast<void**>(&running_), sizeof(int)));
    REQUIRE_CUDA(cudaMallocHost(reinterpret_cast<void**>(&release_), sizeof(int)));
    *running_ = *release_ = 0;
    REQUIRE_CUDA(hold_device(running_, release_, stream));
    while (__atomic_load_n(running_, __ATOMIC_SEQ_CST) == 0) std::this_thread::yield();
  }
  ~DeviceHeld() {
    __atomic_store_n(release_, 1, __ATOMIC_SEQ_CST);
    cudaStreamSynchronize(stream_);
    cudaFreeHost(running_);
    cudaFreeHost(release_);
  }

 private:
  cudaStream_t stream_;
  int* running_ = nullptr;
  int* release_ = nullptr;
};

TEST_CASE("host code reading a CUDA tensor while a kernel runs on its device dies naming the host read", "[emu]") {
  Death d = run_death_main("tensor-read-during-kernel");
  INFO(d.output);
  CHECK(d.status != 0);
  CHECK_THAT(d.output, Catch::Contains("cuda emulator: host code accessed device memory of cuda:0 at"));
  CHECK_THAT(d.output, !Catch::Contains("read "));
}

TEST_CASE("while a kernel runs on a device, copies on its other streams read and write its memory", "[emu]") {
  Buffer x(1024);
  x.write(std::vector<float>(1024, 4.0f));
  cudaStream_t held, copies;
  REQUIRE_CUDA(cudaStreamCreate(&held));
  REQUIRE_CUDA(cudaStreamCreate(&copies));
  std::vector<float> got(1024, 0.0f), update(1024, 5.0f);
  {
    DeviceHeld running(held);
    REQUIRE_CUDA(cudaMemcpyAsync(got.data(), x.ptr, 1024 * sizeof(float), cudaMemcpyDeviceToHost, copies));
    CHECK(got == std::vector<float>(1024, 4.0f));
    REQUIRE_CUDA(cudaMemcpyAsync(x.ptr, update.data(), 1024 * sizeof(float), cudaMemcpyHostToDevice, copies));
    REQUIRE_CUDA(cudaStreamSynchronize(copies));
  }
  CHECK(x.read() == update);
  REQUIRE_CUDA(cudaStreamDestroy(held));
  REQUIRE_CUDA(cudaStreamDestroy(copies));
}

TEST_CASE("a kernel reaching another device's memory without peer access dies with a message", "[emu]") {
  Death d = run_death_main("cross-device");
  INFO(d.output);
  CHECK(d.status != 0);
  CHECK_THAT(d.output, Catch::Contains("cuda emulator: kernel 'scale_kernel' on cuda:0 accessed memory of cuda:1") &&
                           Catch::Contains("without peer access"));
  // With peer access, the same kernel runs.
  REQUIRE_CUDA(cudaSetDevice(1));
  Buffer b(1024);
  b.write(std::vector<float>(1024, 3.0f));
  REQUIRE_CUDA(cudaSetDevice(0));
  Buffer a(1024);
  REQUIRE_CUDA(cudaDeviceEnablePeerAccess(1, 0));
  REQUIRE_CUDA(scale(b.ptr, a.ptr, 2.0f, 1024, nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  CHECK(a.read() == std::vector<float>(1024, 6.0f));
  REQUIRE_CUDA(cudaDeviceDisablePeerAccess(1));
}

TEST_CASE("a kernel reaching another device's memory while that device runs a kernel is reported naming both",
          "[emu]") {
  Death d = run_death_main("cross-device-during-kernel");
  INFO(d.output);
  CHECK(d.status != 0);
  CHECK_THAT(d.output, Catch::Contains("cudaErrorIllegalAddress: cuda emulator: kernel 'scale_kernel' on cuda:0 "
                                       "accessed memory of cuda:1") &&
                           Catch::Contains("without peer access"));
  CHECK_THAT(d.output, !Catch::Contains("survived"));
  // The fault ended cuda:0's runner: after a reset, a correct kernel there fails with the same text.
  CHECK_THAT(d.output, Catch::Contains("after cudaDeviceReset: cudaErrorLaunchFailure: cuda emulator: kernel "
                                       "'scale_kernel' on cuda:0 accessed memory of cuda:1"));
  // With peer access, the same kernel runs while cuda:1 runs one too.
  REQUIRE_CUDA(cudaSetDevice(1));
  Buffer b(1024);
  b.write(std::vector<float>(1024, 3.0f));
  cudaStream_t held;
  REQUIRE_CUDA(cudaStreamCreate(&held));
  REQUIRE_CUDA(cudaSetDevice(0));
  Buffer a(1024);
  REQUIRE_CUDA(cudaDeviceEnablePeerAccess(1, 0));
  {
    DeviceHeld running(held);
    REQUIRE_CUDA(scale(b.ptr, a.ptr, 2.0f, 1024, nullptr));
    REQUIRE_CUDA(cudaStreamSynchronize(nullptr));
  }
  CHECK(a.read() == std::vector<float>(1024, 6.0f));
  REQUIRE_CUDA(cudaDeviceDisablePeerAccess(1));
  REQUIRE_CUDA(cudaStreamDestroy(held));
}

TEST_CASE("a kernel reading pageable host memory is reported naming the kernel", "[emu]") {
  Death d = run_death_main("pageable-read");
  INFO(d.output);
  CHECK(d.status != 0);
  CHECK_THAT(d.output, Catch::Contains("cudaErrorIllegalAddress: cuda emulator: kernel 'scale_kernel' on cuda:0 "
                                       "accessed 0x") &&
                           Catch::Contains("which is neither device memory nor pinned host memory"));
}

TEST_CASE("a killed kernel runner fails its device, also the kernel it was running, naming the device", "[emu]") {
  Death d = run_death_main("runner-killed");
  INFO(d.output);
  CHECK(d.status != 0);
  CHECK_THAT(d.output, Catch::Contains("cudaErrorLaunchFailure: cuda emulator: the kernel runner of cuda:0 (pid ") &&
                           Catch::Contains(") was killed by signal Killed") &&
                           Catch::Contains("cuda:0 runs nothing more"));
}

TEST_CASE("a child forked after the first CUDA call cannot use its parent's devices", "[emu]") {
  Death d = run_death_main("forked-child");
  INFO(d.output);
  CHECK(d.status != 0);
  CHECK_THAT(d.output, Catch::Contains("cudaErrorInitializationError: cuda emulator: this process is a fork of "
                                       "the one that started the emulated devices"));
  CHECK_THAT(d.output, Catch::Contains("the parent's launch ran"));
}

TEST_CASE(
    "in checking mode a store one element past a tensor or a cudaMalloc is reported, naming the kernel and "
    "the allocation",
    "[emu][check]") {
  for (const char* mode : {"tensor-overrun", "malloc-overrun"}) {
    Death d = run_death_main(mode);
    INFO(mode << ": " << d.output);
    CHECK(d.status != 0);
    CHECK_THAT(d.output, !Catch::Contains("survived"));
    // The canary, checked when the kernel completes, or AddressSanitizer at the store.
    CHECK_THAT(d.output, Catch::Contains("kernel 'fill_kernel' on cuda:0 wrote past the end of an allocation: byte") &&
                             Catch::Contains(" +0") && Catch::Contains(" after the 4000 bytes requested at 0x") &&
                             Catch::Contains(" on cuda:0 (the checking mode's guard, EMBER_EMU_CHECK=1); the "
                                             "allocation was made at\n"));
    if (std::string(mode) == "tensor-overrun") {
      CHECK_THAT(d.output, Catch::Contains("ember::cuda::CachingAllocator::allocate") &&
                               Catch::Contains("tensor_of_1000_floats(float)"));
    } else {
      CHECK_THAT(d.output, Catch::Contains("cuda_malloc_1000_floats()"));
    }
#if defined(__SANITIZE_ADDRESS__)
    CHECK_THAT(d.output, Catch::Contains("AddressSanitizer: use-after-poison"));
#else
    CHECK(WEXITSTATUS(d.status) == 3);
    CHECK_THAT(d.output, Catch::Contains("cudaErrorLaunchFailure: kernel 'fill_kernel' on cuda:0 wrote past"));
    CHECK_THAT(d.output, Catch::Contains("bytes +0 to +3 after the 4000 bytes"));
#endif
  }
}

TEST_CASE("in checking mode a copy past a tensor's end is reported at the next synchronisation", "[emu][check]") {
  Death d = run_death_main("copy-overrun");
  INFO(d.output);
  CHECK(d.status != 0);
  CHECK_THAT(d.output, Catch::Contains("wrote past the end of an allocation: byte") &&
                           Catch::Contains(" after the 4000 bytes requested at 0x") &&
                           Catch::Contains("tensor_of_1000_floats(float)"));
  // Copies write through the host's alias of device memory, which AddressSanitizer does not
  // watch: the canary reports it in every build.
  CHECK_THAT(d.output,
             Catch::Contains("unspecified launch failure: found at a synchronisation of cuda:0: a copy, "
                             "memset or collective (or a kernel still running on another stream) wrote past") &&
                 Catch::Contains("bytes +0 to +3 after"));
}

TEST_CASE("in checking mode the off-by-one's correct twin runs, and the neighbouring tensor is unchanged",
          "[emu][check]") {
  const bool was_checking = emu::checking();
  emu::set_checking(true);
  const TensorOptions on_cuda0 = TensorOptions(kFloat32).device(Device::cuda(0));
  {
    Tensor x = zeros({1000}, on_cuda0), neighbour = ones({1000}, on_cuda0);
    REQUIRE_CUDA(fill(x.data_ptr<float>(), 1000, 7.0f, false, nullptr));
    REQUIRE_CUDA(cudaDeviceSynchronize());
    CHECK(x.cpu().to_vector<float>() == std::vector<float>(1000, 7.0f));
    CHECK(neighbour.cpu().to_vector<float>() == std::vector<float>(1000, 1.0f));
  }
  Buffer raw(1000);
  REQUIRE_CUDA(fill(raw.ptr, 1000, 7.0f, false, nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  CHECK(raw.read() == std::vector<float>(1000, 7.0f));
  emu::set_checking(was_checking);
}

TEST_CASE("writing past the dynamic shared memory is caught", "[emu]") {
  Death d = run_death_main("shared-overrun");
  INFO(d.output);
  CHECK(d.status != 0);
  // The canary, or AddressSanitizer in the ASan build.
  CHECK((d.output.find("wrote past its 1024 bytes of dynamic shared memory") != std::string::npos ||
         d.output.find("AddressSanitizer") != std::string::npos));
}

#if defined(__SANITIZE_ADDRESS__)
// Kernels run in the device's runner process, whose shadow memory mirrors the host's poisoning of
// each allocation's redzone and of freed memory: both reported there, and the device fails.
TEST_CASE("a kernel writing past a cudaMalloc block or reading a freed one is caught by AddressSanitizer", "[emu]") {
  for (const char* mode : {"overrun", "use-after-free"}) {
    Death d = run_death_main(mode);
    INFO(mode << ": " << d.output);
    CHECK(d.status != 0);
    CHECK_THAT(d.output, Catch::Contains("AddressSanitizer: use-after-poison") && Catch::Contains("scale_kernel"));
    CHECK_THAT(d.output, Catch::Contains("cudaErrorLaunchFailure: cuda emulator: the kernel runner of cuda:0 (pid ") &&
                             Catch::Contains("exited with status"));
  }
}

// Fibers keep their stack's fake stack from one block to the next (cuda/emu/fiber.h): reading a
// returned function's local is still reported after 20,000 blocks have used those stacks.
TEST_CASE("a kernel reading a returned function's local is caught by AddressSanitizer", "[emu]") {
  Death d = run_death_main("stack-after-return");
  INFO(d.output);
  CHECK(d.status != 0);
  CHECK(d.output.find("stack-use-after-return") != std::string::npos);
}
#endif

TEST_CASE("stream work never runs inline: in delay mode an unsynchronised read sees the old data", "[emu]") {
  Buffer x(256);
  x.write(std::vector<float>(256, 1.0f));
  float* pinned = nullptr;
  REQUIRE_CUDA(cudaMallocHost(reinterpret_cast<void**>(&pinned), 256 * sizeof(float)));
  for (int i = 0; i < 256; ++i) pinned[i] = -1.0f;
  const int delay_before = emu::delay_ms();
  emu::set_delay_ms(50);
  REQUIRE_CUDA(scale(x.ptr, x.ptr, 5.0f, 256, nullptr));
  REQUIRE_CUDA(cudaMemcpyAsync(pinned, x.ptr, 256 * sizeof(float), cudaMemcpyDeviceToHost, nullptr));
  CHECK(pinned[7] == -1.0f);  // the copy has not run: a missing synchronisation reads this
  REQUIRE_CUDA(cudaStreamSynchronize(nullptr));
  CHECK(pinned[7] == 5.0f);
  emu::set_delay_ms(delay_before);
  REQUIRE_CUDA(cudaFreeHost(pinned));
}

TEST_CASE("allocations fail at the device's capacity, and succeed again after a free", "[emu]") {
  size_t free_bytes = 0, total = 0;
  REQUIRE_CUDA(cudaMemGetInfo(&free_bytes, &total));
  CHECK(total == (size_t{256} << 20));  // EMBER_EMULATED_GPU_MEMORY=256M
  void* too_big = nullptr;
  CHECK(cudaMalloc(&too_big, total + 1) == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  void* most = nullptr;
  REQUIRE_CUDA(cudaMalloc(&most, total - (size_t{16} << 20)));
  void* more = nullptr;
  CHECK(cudaMalloc(&more, size_t{32} << 20) == cudaErrorMemoryAllocation);
  cudaGetLastError();
  REQUIRE_CUDA(cudaFree(most));
  REQUIRE_CUDA(cudaMalloc(&more, size_t{32} << 20));
  REQUIRE_CUDA(cudaFree(more));
}
