// cuda/emu's costs: a thread switch at a barrier, an elementwise kernel's bandwidth next to the
// CPU backend's own add, and a shared-memory tiled GEMM; what the kernel runner process costs: a
// launch (next to a host function on the same stream, which no runner runs) and a byte copied
// (next to the host's memcpy); then what the checking mode (EMBER_EMU_CHECK=1) costs against
// checking off in the same run: race detection on the first three, and guarded allocations.
// Emulated kernels are for correctness in CI, not speed; these
// figures say how large a test can be, and catch a slow switch.
//   bazel run --config=bench //tools/bench:emu [-- rounds]
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"
#include "cuda/caching_allocator.h"
#include "cuda/emu/check_mode.h"
#include "cuda/emu/emu.h"
#include "cuda/emu/runner.h"
#include "tools/bench/emu_kernels.h"
#include "tools/bench/timing.h"

using namespace ember;
using namespace ember::bench;

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "emu bench: %s: %s (%s)\n", what, cudaGetErrorString(e), emu::failure_message().c_str());
  std::exit(1);
}

template <class F>
double median_seconds(int rounds, F&& call) {
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    double start = now_seconds();
    call();
    t.push_back(now_seconds() - start);
  }
  return median(t);
}

// CPU seconds used so far by this process and by cuda:0's runner (all their threads).
double own_cpu_seconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

double runner_cpu_seconds() {
  std::ifstream stat("/proc/" + std::to_string(emu::runner_pid(0)) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t after_name = text.rfind(')');
  if (after_name == std::string::npos) return 0;
  // Fields 14 and 15 (utime, stime) in clock ticks; the text after ')' starts at field 3.
  const char* p = text.c_str() + after_name + 2;
  unsigned long long utime = 0, stime = 0;
  for (int field = 3; field < 14; ++field) p = std::strchr(p, ' ') + 1;
  std::sscanf(p, "%llu %llu", &utime, &stime);
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct PerCall {
  double wall_us, host_cpu_us, runner_cpu_us;
};

// `calls` calls of `call`, each synchronised: wall time, and CPU time of both processes, per call.
template <class F>
PerCall per_call(int calls, F&& call) {
  const double wall = now_seconds(), host = own_cpu_seconds(), runner = runner_cpu_seconds();
  for (int i = 0; i < calls; ++i) call();
  return {(now_seconds() - wall) / calls * 1e6, (own_cpu_seconds() - host) / calls * 1e6,
          (runner_cpu_seconds() - runner) / calls * 1e6};
}

void nothing(void*) {}

float* device_floats(size_t n) {
  float* p = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(float)), "cudaMalloc");
  check(cudaMemset(p, 0, n * sizeof(float)), "cudaMemset");
  return p;
}

// `count` caching-allocator allocations of 4000 bytes, each freed at once, through to the
// synchronisation that runs the guards' bookkeeping on the stream.
double allocate_and_free(bool checking, int count) {
  emu::set_checking(checking);
  cuda::CachingAllocator alloc;
  const double start = now_seconds();
  for (int i = 0; i < count; ++i) alloc.free(alloc.allocate(0, 4000, nullptr));
  check(cudaDeviceSynchronize(), "allocate_and_free");
  const double seconds = now_seconds() - start;
  alloc.empty_cache();
  return seconds;
}

// `kernels` launches of a 1000-float add while `live` blocks of 4000 bytes are allocated: in
// checking mode each launch verifies all their guards.
double kernels_beside_live_blocks(bool checking, int live, int kernels) {
  emu::set_checking(checking);
  cuda::CachingAllocator alloc;
  std::vector<void*> blocks;
  for (int i = 0; i < live; ++i) blocks.push_back(alloc.allocate(0, 4000, nullptr));
  auto* x = static_cast<float*>(blocks[0]);
  check(cudaMemset(x, 0, 1000 * sizeof(float)), "cudaMemset");
  const double start = now_seconds();
  for (int k = 0; k < kernels; ++k) add_floats(x, x, x, 1000, nullptr);
  check(cudaDeviceSynchronize(), "kernels_beside_live_blocks");
  const double seconds = now_seconds() - start;
  for (void* b : blocks) alloc.free(b);
  check(cudaDeviceSynchronize(), "free");
  alloc.empty_cache();
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  emu::set_device_count(1);
  std::printf("emu benchmark: %d CPU threads, %d rounds (median)\n", cpu::num_threads(), rounds);

  // Thread switches: 1024 threads pass 2 barriers per iteration; each barrier suspends and resumes
  // every thread once.
  const int threads = 1024, iterations = 200;
  float* out = device_floats(threads);
  auto run_barriers = [&] {
    barrier_loop(out, threads, iterations, nullptr);
    check(cudaDeviceSynchronize(), "barrier_loop");
  };
  const double barrier_s = median_seconds(rounds, run_barriers);
  const double switch_ns = barrier_s / (double{threads} * 2 * iterations) * 1e9;

  // Elementwise: c = a + b, 32M floats (128 MB operands), against the CPU backend's a + b.
  const int64_t n = 32 << 20;
  float* a = device_floats(static_cast<size_t>(n));
  float* b = device_floats(static_cast<size_t>(n));
  float* c = device_floats(static_cast<size_t>(n));
  Tensor ta = randn({n}), tb = randn({n});
  // The two sides alternate, round by round: this VM's memory bandwidth drifts by 2x over minutes.
  std::vector<double> emu_t, cpu_t;
  auto run_add = [&] {
    add_floats(a, b, c, n, nullptr);
    check(cudaDeviceSynchronize(), "add_floats");
  };
  for (int r = 0; r < rounds; ++r) {
    emu_t.push_back(median_seconds(1, run_add));
    cpu_t.push_back(median_seconds(1, [&] { Tensor tc = ta + tb; }));
  }
  const double emu_add_s = median(emu_t), cpu_add_s = median(cpu_t);
  const double bytes = 3.0 * 4.0 * static_cast<double>(n);
  const double emu_gbs = bytes / emu_add_s * 1e-9, cpu_gbs = bytes / cpu_add_s * 1e-9;

  // Tiled GEMM, 512 x 512 (2 n^3 flops).
  const int m = 512;
  float* ga = device_floats(size_t{m} * m);
  float* gb = device_floats(size_t{m} * m);
  float* gc = device_floats(size_t{m} * m);
  auto run_gemm = [&] {
    tiled_gemm(ga, gb, gc, m, nullptr);
    check(cudaDeviceSynchronize(), "tiled_gemm");
  };
  const double gemm_s = median_seconds(rounds, run_gemm);
  const double gemm_gflops = 2.0 * m * m * m / gemm_s * 1e-9;

  // The runner: a launch is handed to another process and waited for; a host function on the same
  // stream is the same stream round trip without it. Copies reach device memory through the
  // host's alias of it: pageable copies both ways, against the host's own memcpy of the bytes.
  const int calls = 4000;
  std::vector<PerCall> launches, host_functions;
  for (int r = 0; r < rounds; ++r) {
    launches.push_back(per_call(calls, [] {
      empty_kernel(nullptr);
      check(cudaStreamSynchronize(nullptr), "empty_kernel");
    }));
    host_functions.push_back(per_call(calls, [] {
      check(cudaLaunchHostFunc(nullptr, nothing, nullptr), "cudaLaunchHostFunc");
      check(cudaStreamSynchronize(nullptr), "host function");
    }));
  }
  auto median_of = [](const std::vector<PerCall>& v, double PerCall::*field) {
    std::vector<double> x;
    for (const PerCall& p : v) x.push_back(p.*field);
    return median(x);
  };
  const size_t copy_bytes = size_t{64} << 20;
  std::vector<char> host_bytes(copy_bytes, 1), host_copy(copy_bytes);
  const double h2d_s = median_seconds(
      rounds, [&] { check(cudaMemcpy(a, host_bytes.data(), copy_bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D"); });
  const double d2h_s = median_seconds(
      rounds, [&] { check(cudaMemcpy(host_bytes.data(), a, copy_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H"); });
  const double memcpy_s = median_seconds(rounds, [&] { std::memcpy(host_copy.data(), host_bytes.data(), copy_bytes); });
  const double copy_gb = static_cast<double>(copy_bytes) * 1e-9;

  // Race detection's cost: checking mode runs each launch's race-checking copy, which records every
  // shared-memory access (tools/build/cuda.bzl); the default mode above runs the plain copy, so
  // the instrumentation costs it nothing.
  emu::set_checking(true);
  const double checked_barrier_s = median_seconds(rounds, run_barriers);
  const double checked_add_s = median_seconds(rounds, run_add);
  const double checked_gemm_s = median_seconds(rounds, run_gemm);
  emu::set_checking(false);
  // Guards: off and on alternate, round by round, as above.
  const int allocations = 20000, live = 1000, kernels = 2000;
  std::vector<double> alloc_off, alloc_on, kernel_off, kernel_on;
  for (int r = 0; r < rounds; ++r) {
    alloc_off.push_back(allocate_and_free(false, allocations));
    alloc_on.push_back(allocate_and_free(true, allocations));
    kernel_off.push_back(kernels_beside_live_blocks(false, live, kernels));
    kernel_on.push_back(kernels_beside_live_blocks(true, live, kernels));
  }
  emu::set_checking(false);
  const double alloc_off_us = median(alloc_off) / allocations * 1e6, alloc_on_us = median(alloc_on) / allocations * 1e6;
  const double kernel_off_us = median(kernel_off) / kernels * 1e6, kernel_on_us = median(kernel_on) / kernels * 1e6;
  const double check_ns_per_guard = (kernel_on_us - kernel_off_us) / live * 1e3;

  std::printf("\n%-44s %12s %12s %7s\n", "measure", "emulated", "CPU backend", "ratio");
  std::printf("%-44s %12.1f %12s %7s\n", "thread switch at a barrier (ns per thread)", switch_ns, "-", "-");
  std::printf("%-44s %12.2f %12.2f %7.2f\n", "c = a + b, 32M floats (GB/s)", emu_gbs, cpu_gbs, emu_gbs / cpu_gbs);
  std::printf("%-44s %12.2f %12s %7s\n", "tiled GEMM 512^3, 16x16 tiles (GFLOP/s)", gemm_gflops, "-", "-");
  const double launch_us = median_of(launches, &PerCall::wall_us);
  const double host_fn_us = median_of(host_functions, &PerCall::wall_us);
  std::printf("\n%-44s %12s %12s %7s\n", "kernel runner", "launch", "host fn", "extra");
  std::printf("%-44s %12.1f %12.1f %7.1f\n", "launch + synchronize, wall (us)", launch_us, host_fn_us,
              launch_us - host_fn_us);
  std::printf("%-44s %12.1f %12.1f %7.1f\n", "  host process CPU (us)", median_of(launches, &PerCall::host_cpu_us),
              median_of(host_functions, &PerCall::host_cpu_us),
              median_of(launches, &PerCall::host_cpu_us) - median_of(host_functions, &PerCall::host_cpu_us));
  std::printf("%-44s %12.1f %12.1f %7.1f\n", "  runner process CPU (us)", median_of(launches, &PerCall::runner_cpu_us),
              median_of(host_functions, &PerCall::runner_cpu_us),
              median_of(launches, &PerCall::runner_cpu_us) - median_of(host_functions, &PerCall::runner_cpu_us));
  std::printf("\n%-44s %12s %12s %7s\n", "copies, 64 MB pageable", "copy", "memcpy", "ratio");
  std::printf("%-44s %12.2f %12.2f %7.2f\n", "host to device (GB/s)", copy_gb / h2d_s, copy_gb / memcpy_s,
              memcpy_s / h2d_s);
  std::printf("%-44s %12.2f %12.2f %7.2f\n", "device to host (GB/s)", copy_gb / d2h_s, copy_gb / memcpy_s,
              memcpy_s / d2h_s);
  std::printf("\n%-44s %12s %12s %7s\n", "racecheck (seconds per run)", "checking off", "checking on", "ratio");
  std::printf("%-44s %12.3f %12.3f %7.2f\n", "1024 threads x 400 barriers", barrier_s, checked_barrier_s,
              checked_barrier_s / barrier_s);
  std::printf("%-44s %12.3f %12.3f %7.2f\n", "c = a + b, 32M floats", emu_add_s, checked_add_s,
              checked_add_s / emu_add_s);
  std::printf("%-44s %12.3f %12.3f %7.2f\n", "tiled GEMM 512^3", gemm_s, checked_gemm_s, checked_gemm_s / gemm_s);
  std::printf("\n%-44s %12s %12s %7s\n", "guarded allocations", "on", "off", "ratio");
  std::printf("%-44s %12.2f %12.2f %7.2f\n", "allocate + free, 4000 bytes (us)", alloc_on_us, alloc_off_us,
              alloc_on_us / alloc_off_us);
  std::printf("%-44s %12.2f %12.2f %7.2f\n", "1000-float add, 1000 blocks live (us/kernel)", kernel_on_us,
              kernel_off_us, kernel_on_us / kernel_off_us);
  std::printf("%-44s %12.1f %12s %7s\n", "guard verified after a kernel (ns per guard)", check_ns_per_guard, "-", "-");
  std::printf(
      "\nbench emu: switch_ns=%.1f elementwise_vs_cpu=%.2f gemm_gflops=%.2f racecheck_barrier_x=%.2f "
      "racecheck_add_x=%.2f racecheck_gemm_x=%.2f guard_alloc_us=%.2f guard_check_ns=%.1f "
      "launch_extra_us=%.1f h2d_gbs=%.2f d2h_gbs=%.2f\n",
      switch_ns, emu_gbs / cpu_gbs, gemm_gflops, checked_barrier_s / barrier_s, checked_add_s / emu_add_s,
      checked_gemm_s / gemm_s, alloc_on_us - alloc_off_us, check_ns_per_guard, launch_us - host_fn_us, copy_gb / h2d_s,
      copy_gb / d2h_s);
  for (float* p : {out, a, b, c, ga, gb, gc}) cudaFree(p);
  return 0;
}
