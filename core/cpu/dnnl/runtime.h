// oneDNN plumbing shared by the CPU backend's oneDNN kernels: the engine, a stream per calling
// thread (with its OpenMP team sized to Ember's thread count), dtype mapping, channels-last
// conversion of Ember tensors and single-threaded execution of small reorders. Everything here is
// safe to call from several threads at once.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <signal.h>

#include <optional>

#include "core/tensor.h"

namespace ember::cpu::onednn {

const dnnl::engine& engine();

// Sets the calling thread's OpenMP team size to ember::cpu::num_threads() (1 inside a
// parallel_for task) before a oneDNN call that runs on OpenMP (primitives, dnnl_sgemm). The
// team's workers hold the asynchronous signals for good (see SignalsHeld).
void size_openmp_team();

// Holds every asynchronous signal on the calling thread for its lifetime; one that arrives
// meanwhile is delivered when it ends (or to a thread that does not hold it). oneDNN's JIT GEMM
// kernels (dnnl_sgemm, and the convolutions and reorders built on them) point rsp at a heap buffer
// while they run (oneDNN issue 4845, fixed in 3.11; Debian ships 2.6), so a handler run on a thread
// inside one writes its signal frame over the heap: a no-op SIGUSR2 handler and a stream of
// SIGUSR2 corrupted the train tool's heap in 30 runs of 30. Every oneDNN call runs under one.
class SignalsHeld {
 public:
  SignalsHeld();
  ~SignalsHeld();
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  sigset_t previous_;
};

// oneDNN on one thread, on the calling thread, for the guard's lifetime: primitives made meanwhile
// are made for one thread and run so wherever they run later. A primitive keeps the thread count it
// was made with, and oneDNN runs a multi-threaded one on one thread inside a parallel region, where
// kernels that meet their threads at a barrier would wait there for ever.
class OneThread {
 public:
  OneThread();
  ~OneThread();
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int previous_;
};

// The calling thread's stream, after size_openmp_team(): oneDNN's kernels and Ember's
// parallel_for share one OpenMP team, so they never run more threads than Ember was asked for.
dnnl::stream& stream();

// The oneDNN type for an Ember dtype, or nullopt when the oneDNN kernels should not take it.
std::optional<dnnl::memory::data_type> data_type(DType dtype);

// True when t's memory is exactly NHWC-dense; strides of size-1 dims do not matter.
bool is_channels_last(const Tensor& t);

// t itself when channels-last, else a channels-last copy (a parallel plane transpose for NCHW
// images, which is what a network's input batch is; Ember's generic copy for anything else).
Tensor to_channels_last(const Tensor& t);

// Attributes for every primitive Ember caches: a user-managed scratchpad. oneDNN's default
// (library-managed, without DNNL_ENABLE_CONCURRENT_EXEC, as Debian builds it) is one buffer per
// primitive, so two threads running one cached primitive at once would share its scratch memory.
dnnl::primitive_attr user_scratchpad();

// A reorder between two layouts, with the scratchpad each execution must bring.
struct Reorder {
  dnnl::reorder primitive;
  dnnl::memory::desc scratchpad;
};
Reorder make_reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to);

// Runs `reorder` on the calling thread's stream and waits for it; `single_threaded` for small
// tensors (weights), where waking the OpenMP team costs more than the copy.
void execute(const Reorder& reorder, dnnl::memory& from, dnnl::memory& to, bool single_threaded = false);

// A oneDNN memory over t's storage (no copy); `desc` must describe t's layout.
dnnl::memory user_memory(const dnnl::memory::desc& desc, const Tensor& t);

// A scratch buffer holding `desc`, owned by the returned tensor (keep it alive while in use).
Tensor scratch_for(const dnnl::memory::desc& desc);

}  // namespace ember::cpu::onednn
