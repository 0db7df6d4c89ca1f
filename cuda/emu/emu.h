// cuda/emu's own controls (beyond the CUDA runtime API it implements) and its kernel launch.
//
//   ember::emu::set_device_count(2);                 // before the first CUDA call; or EMBER_EMULATED_GPUS=2
//   EMBER_LAUNCH(scale, blocks, 256, 0, stream, out, in, n);   // cuda/lang.h: <<<...>>> under nvcc
//   cudaError_t e = cudaStreamSynchronize(stream);  // a kernel's failure surfaces here, as on a GPU
//   std::string why = ember::emu::failure_message(); // ...and says what went wrong
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda/emu/block.h"
#include "cuda/emu/cuda_runtime.h"
#include "cuda/emu/racecheck.h"

namespace ember::emu {

// Emulated devices and their memory; fixed at the first CUDA call unless reset_for_testing.
void set_device_count(int count);
void set_device_memory(size_t bytes);
// EMBER_EMU_DELAY=<ms>: each queued stream operation waits this long before it runs, so host code
// that reads a result without synchronising reads it too early.
void set_delay_ms(int ms);
int delay_ms();
// What the last failure on the current device was (a kernel's divergent barrier, a bad copy):
// the text behind the error code a later call returned.
std::string failure_message();

// Queues a kernel on `stream` (null: the current device's default stream); `keep` holds the
// arguments until the kernel ran.
cudaError_t enqueue_kernel(KernelLaunch launch, cudaStream_t stream, std::shared_ptr<const void> keep);

template <class Kernel>
struct KernelParams;
template <class... Params>
struct KernelParams<void (*)(Params...)> {
  using Tuple = std::tuple<std::decay_t<Params>...>;
  // Arguments are copied, as bytes, to the process that runs the kernel (CUDA's rule too).
  static constexpr bool trivially_copyable = (std::is_trivially_copyable_v<std::decay_t<Params>> && ...);
};

// The key under which a launch's race-checking copy registers (below): the kernel and argument
// types, and the source file that launches it (anonymous kernels of two files stay apart).
template <auto Kernel, class Tuple>
std::string kernel_key() {
  return std::string(__BASE_FILE__) + ": " + __PRETTY_FUNCTION__;
}

// Each emulated source is compiled twice (tools/build/cuda.bzl): plainly, and as the checking
// mode's copy (EMBER_EMU_RACECHECK_COPY) with ThreadSanitizer's instrumentation and its symbols
// local. The inline namespaces keep the two copies' launch code apart even where a kernel has
// external linkage.
#if defined(EMBER_EMU_RACECHECK_COPY)
inline namespace racecheck_copy {
#else
inline namespace plain {
#endif

// A launch's thread loop, with the kernel inlined into it (`Kernel` is a template argument for
// that): a barrier-free thread costs a few ns.
template <auto Kernel, class Tuple>
__attribute__((flatten)) void run_kernel_threads(const void* p) {
  const Tuple& args = *static_cast<const Tuple*>(p);
  while (begin_next_thread()) {
    std::apply(Kernel, args);
    end_thread();
  }
}

#if defined(EMBER_EMU_RACECHECK_COPY)
// Registered when the library loads; nothing in the copy is ever called but its thread loops.
template <auto Kernel, class Tuple>
struct RacecheckCopy {
  static inline const bool registered =
      (racecheck::register_copy(kernel_key<Kernel, Tuple>(), &run_kernel_threads<Kernel, Tuple>), true);
};
#endif

// EMBER_LAUNCH passes a kernel's name; a kernel template with several arguments goes through a
// constexpr pointer.
template <auto Kernel, class... Args>
cudaError_t launch(const char* name, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, Args&&... args) {
  using Tuple = typename KernelParams<decltype(Kernel)>::Tuple;
  static_assert(std::tuple_size_v<Tuple> == sizeof...(Args), "EMBER_LAUNCH: wrong number of kernel arguments");
  static_assert(KernelParams<decltype(Kernel)>::trivially_copyable,
                "EMBER_LAUNCH: kernel arguments must be trivially copyable");
  static_assert(sizeof(Tuple) <= kKernelArgumentBytes, "EMBER_LAUNCH: more than 4 KB of kernel arguments");
  auto packed = std::make_shared<const Tuple>(std::forward<Args>(args)...);
  KernelLaunch config;
  config.name = name;
  config.grid = grid;
  config.block = block;
  config.dynamic_shared_bytes = shared_bytes;
  config.args = packed.get();
  config.args_bytes = sizeof(Tuple);
  config.run_threads = &run_kernel_threads<Kernel, Tuple>;
#if defined(EMBER_EMU_RACECHECK_COPY)
  (void)RacecheckCopy<Kernel, Tuple>::registered;
#else
  static const auto checked = racecheck::registered_copy(kernel_key<Kernel, Tuple>());
  config.run_threads_checked = checked;
#endif
  return enqueue_kernel(config, stream, std::move(packed));
}

}  // inline namespace

}  // namespace ember::emu
