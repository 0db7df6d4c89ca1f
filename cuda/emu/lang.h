// The CUDA language for the host compiler: what a kernel in cuda/kernels/*.cu needs to compile
// and run on cuda/emu. Included through cuda/lang.h in the default (non-nvcc) build only.
//
// A kernel reads threadIdx/blockIdx from the emulated thread running it; __syncthreads and the
// warp operations suspend that thread (a fiber) until its block or warp arrives. __shared__
// variables are per OS thread, and a block runs on one OS thread from start to end, so each block
// running at a time has its own copy.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/half.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __grid_constant__
#if defined(EMBER_EMU_SHARED_MEMORY_SCAN)
// Only ever preprocessed (tools/build/cuda.bzl): each use of shared memory leaves this token, and a
// source whose preprocessed text has none gets no race-checking copy.
#define __shared__ ember_emu_uses_shared_memory static thread_local
#else
#define __shared__ static thread_local
#endif
#define __constant__ static

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}  // NOLINT: CUDA converts implicitly
};

constexpr int warpSize = 32;

namespace ember::emu {

// The emulated thread running now (set by the block scheduler at every switch).
struct ThreadContext {
  uint3 thread_idx;
};
struct BlockDims {
  uint3 block_idx;
  dim3 block_dim, grid_dim;
};
extern thread_local ThreadContext* current_thread;
extern thread_local const BlockDims* current_block;

// Block barrier and warp operations; `site` ("file:line") tells barriers apart.
void syncthreads(const char* site);
enum class WarpOp : uint8_t { Shfl, ShflUp, ShflDown, ShflXor, Ballot, Any, All, Sync };
uint64_t warp_exchange(WarpOp op, unsigned mask, uint64_t value, int arg, int width, const char* site);
// The launch's dynamic shared memory (EMBER_DYNAMIC_SHARED).
void* dynamic_shared_memory();

template <class T>
T warp_shuffle(WarpOp op, unsigned mask, T value, int arg, int width, const char* site) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move values of up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = warp_exchange(op, mask, bits, arg, width, site);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

}  // namespace ember::emu

#define EMBER_EMU_STR2(x) #x
#define EMBER_EMU_STR(x) EMBER_EMU_STR2(x)
#define EMBER_EMU_SITE __FILE__ ":" EMBER_EMU_STR(__LINE__)

#define threadIdx (::ember::emu::current_thread->thread_idx)
#define blockIdx (::ember::emu::current_block->block_idx)
#define blockDim (::ember::emu::current_block->block_dim)
#define gridDim (::ember::emu::current_block->grid_dim)

#define __syncthreads() ::ember::emu::syncthreads(EMBER_EMU_SITE)
#define __syncwarp(...)                                                                                              \
  (void)::ember::emu::warp_exchange(::ember::emu::WarpOp::Sync, (__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 0xffffffffu, \
                                    0, 0, 32, EMBER_EMU_SITE)
#define __shfl_sync(mask, var, lane, ...)                                                                             \
  ::ember::emu::warp_shuffle(::ember::emu::WarpOp::Shfl, mask, var, lane, (__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 32, \
                             EMBER_EMU_SITE)
#define __shfl_up_sync(mask, var, delta, ...)                                \
  ::ember::emu::warp_shuffle(::ember::emu::WarpOp::ShflUp, mask, var, delta, \
                             (__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 32, EMBER_EMU_SITE)
#define __shfl_down_sync(mask, var, delta, ...)                                \
  ::ember::emu::warp_shuffle(::ember::emu::WarpOp::ShflDown, mask, var, delta, \
                             (__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 32, EMBER_EMU_SITE)
#define __shfl_xor_sync(mask, var, lane_mask, ...)                                \
  ::ember::emu::warp_shuffle(::ember::emu::WarpOp::ShflXor, mask, var, lane_mask, \
                             (__VA_ARGS__ + 0) ? (__VA_ARGS__ + 0) : 32, EMBER_EMU_SITE)
#define __ballot_sync(mask, predicate) \
  static_cast<unsigned>(               \
      ::ember::emu::warp_exchange(::ember::emu::WarpOp::Ballot, mask, (predicate) ? 1 : 0, 0, 32, EMBER_EMU_SITE))
#define __any_sync(mask, predicate) \
  static_cast<int>(                 \
      ::ember::emu::warp_exchange(::ember::emu::WarpOp::Any, mask, (predicate) ? 1 : 0, 0, 32, EMBER_EMU_SITE))
#define __all_sync(mask, predicate) \
  static_cast<int>(                 \
      ::ember::emu::warp_exchange(::ember::emu::WarpOp::All, mask, (predicate) ? 1 : 0, 0, 32, EMBER_EMU_SITE))

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// Atomics: blocks run on several OS threads at once, so these are real atomics (relaxed, as on a GPU).
template <class T>
inline T ember_emu_atomic_add(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
}
inline int atomicAdd(int* a, int v) { return ember_emu_atomic_add(a, v); }
inline unsigned atomicAdd(unsigned* a, unsigned v) { return ember_emu_atomic_add(a, v); }
inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) { return ember_emu_atomic_add(a, v); }
inline float atomicAdd(float* a, float v) { return ember_emu_atomic_add(a, v); }
inline double atomicAdd(double* a, double v) { return ember_emu_atomic_add(a, v); }
template <class T>
inline T ember_emu_atomic_update(T* address, T value, bool take_max) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load(std::memory_order_relaxed);
  while ((take_max ? value > old : value < old) && !ref.compare_exchange_weak(old, value, std::memory_order_relaxed)) {
  }
  return old;
}
inline int atomicMax(int* a, int v) { return ember_emu_atomic_update(a, v, true); }
inline unsigned atomicMax(unsigned* a, unsigned v) { return ember_emu_atomic_update(a, v, true); }
inline int atomicMin(int* a, int v) { return ember_emu_atomic_update(a, v, false); }
inline unsigned atomicMin(unsigned* a, unsigned v) { return ember_emu_atomic_update(a, v, false); }
template <class T>
inline T ember_emu_atomic_cas(T* address, T compare, T value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value, std::memory_order_relaxed);
  return compare;  // the old value either way
}
inline int atomicCAS(int* a, int c, int v) { return ember_emu_atomic_cas(a, c, v); }
inline unsigned atomicCAS(unsigned* a, unsigned c, unsigned v) { return ember_emu_atomic_cas(a, c, v); }
inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long c, unsigned long long v) {
  return ember_emu_atomic_cas(a, c, v);
}
template <class T>
inline T ember_emu_atomic_exchange(T* address, T value) {
  return std::atomic_ref<T>(*address).exchange(value, std::memory_order_relaxed);
}
inline int atomicExch(int* a, int v) { return ember_emu_atomic_exchange(a, v); }
inline unsigned atomicExch(unsigned* a, unsigned v) { return ember_emu_atomic_exchange(a, v); }
inline float atomicExch(float* a, float v) { return ember_emu_atomic_exchange(a, v); }

// Intrinsics and fast math (the emulator computes them exactly; kernels must not rely on their
// lower precision on a GPU either).
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return std::min(1.0f, std::max(0.0f, x)); }
inline int __float_as_int(float x) {
  int i;
  std::memcpy(&i, &x, 4);
  return i;
}
inline float __int_as_float(int i) {
  float x;
  std::memcpy(&x, &i, 4);
  return x;
}
inline unsigned __float_as_uint(float x) {
  unsigned i;
  std::memcpy(&i, &x, 4);
  return i;
}
inline float __uint_as_float(unsigned i) {
  float x;
  std::memcpy(&x, &i, 4);
  return x;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(unsigned x) { return x == 0 ? 32 : __builtin_clz(x); }
inline int __ffs(unsigned x) { return __builtin_ffs(static_cast<int>(x)); }

// CUDA's global min/max overloads (device code calls them unqualified).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// 16-bit floats: Ember's own types, with cuda_fp16.h / cuda_bf16.h's conversion names.
using __half = ember::Half;
using __nv_bfloat16 = ember::BFloat16;
inline __half __float2half(float x) { return __half(x); }
inline float __half2float(__half x) { return static_cast<float>(x); }
inline __nv_bfloat16 __float2bfloat16(float x) { return __nv_bfloat16(x); }
inline float __bfloat162float(__nv_bfloat16 x) { return static_cast<float>(x); }
