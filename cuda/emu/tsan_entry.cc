// The ThreadSanitizer entry points that GCC's -fsanitize=thread instrumentation of emulated kernels
// calls (tools/build/cuda.bzl), in place of TSan's runtime, which is not linked: a load or store
// goes to racecheck while this OS thread runs a block in checking mode and returns at once
// otherwise; an atomic does the operation itself (atomics never race); the rest do nothing.
#include "cuda/emu/racecheck.h"

#define EMBER_TSAN_ENTRY extern "C" __attribute__((visibility("default")))

namespace rc = ember::emu::racecheck;

// A macro, not a function: the site is the return address of the entry point itself.
#define EMBER_TSAN_RECORD(address, bytes, write)                                                           \
  do {                                                                                                     \
    rc::BlockRecord* block = rc::active;                                                                   \
    if (__builtin_expect(block != nullptr, 0))                                                             \
      rc::record(*block, reinterpret_cast<uintptr_t>(address), bytes, write, __builtin_return_address(0)); \
  } while (0)

#define EMBER_TSAN_ACCESSES(n)                                                                         \
  EMBER_TSAN_ENTRY void __tsan_read##n(void* a) { EMBER_TSAN_RECORD(a, n, false); }                    \
  EMBER_TSAN_ENTRY void __tsan_write##n(void* a) { EMBER_TSAN_RECORD(a, n, true); }                    \
  EMBER_TSAN_ENTRY void __tsan_unaligned_read##n(void* a) { EMBER_TSAN_RECORD(a, n, false); }          \
  EMBER_TSAN_ENTRY void __tsan_unaligned_write##n(void* a) { EMBER_TSAN_RECORD(a, n, true); }          \
  EMBER_TSAN_ENTRY void __tsan_volatile_read##n(void* a) { EMBER_TSAN_RECORD(a, n, false); }           \
  EMBER_TSAN_ENTRY void __tsan_volatile_write##n(void* a) { EMBER_TSAN_RECORD(a, n, true); }           \
  EMBER_TSAN_ENTRY void __tsan_unaligned_volatile_read##n(void* a) { EMBER_TSAN_RECORD(a, n, false); } \
  EMBER_TSAN_ENTRY void __tsan_unaligned_volatile_write##n(void* a) { EMBER_TSAN_RECORD(a, n, true); }

EMBER_TSAN_ACCESSES(1)
EMBER_TSAN_ACCESSES(2)
EMBER_TSAN_ACCESSES(4)
EMBER_TSAN_ACCESSES(8)
EMBER_TSAN_ACCESSES(16)

EMBER_TSAN_ENTRY void __tsan_read_range(void* a, unsigned long bytes) { EMBER_TSAN_RECORD(a, bytes, false); }
EMBER_TSAN_ENTRY void __tsan_write_range(void* a, unsigned long bytes) { EMBER_TSAN_RECORD(a, bytes, true); }

EMBER_TSAN_ENTRY void __tsan_init() {}
EMBER_TSAN_ENTRY void __tsan_func_entry(void*) {}
EMBER_TSAN_ENTRY void __tsan_func_exit() {}
EMBER_TSAN_ENTRY void __tsan_vptr_update(void**, void*) {}
EMBER_TSAN_ENTRY void __tsan_vptr_read(void**) {}

// Atomics, in TSan's signatures (the memory orders are TSan's numbering of C++'s); every one is done
// sequentially consistent, which is at least as strong as the order asked for.
#define EMBER_TSAN_FETCH(bits, T, op)                                            \
  EMBER_TSAN_ENTRY T __tsan_atomic##bits##_fetch_##op(volatile T* a, T v, int) { \
    return __atomic_fetch_##op(a, v, __ATOMIC_SEQ_CST);                          \
  }
#define EMBER_TSAN_COMPARE_EXCHANGE(bits, T, strength)                                                                \
  EMBER_TSAN_ENTRY int __tsan_atomic##bits##_compare_exchange_##strength(volatile T* a, T* expected, T v, int, int) { \
    return __atomic_compare_exchange_n(a, expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                    \
  }
#define EMBER_TSAN_ATOMICS(bits, T)                                                                         \
  EMBER_TSAN_ENTRY T __tsan_atomic##bits##_load(const volatile T* a, int) {                                 \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                            \
  }                                                                                                         \
  EMBER_TSAN_ENTRY void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                              \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                         \
  EMBER_TSAN_ENTRY T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                              \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                     \
  }                                                                                                         \
  EMBER_TSAN_FETCH(bits, T, add)                                                                            \
  EMBER_TSAN_FETCH(bits, T, sub)                                                                            \
  EMBER_TSAN_FETCH(bits, T, and)                                                                            \
  EMBER_TSAN_FETCH(bits, T, or)                                                                             \
  EMBER_TSAN_FETCH(bits, T, xor)                                                                            \
  EMBER_TSAN_FETCH(bits, T, nand)                                                                           \
  EMBER_TSAN_COMPARE_EXCHANGE(bits, T, strong)                                                              \
  EMBER_TSAN_COMPARE_EXCHANGE(bits, T, weak)                                                                \
  EMBER_TSAN_ENTRY T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T expected, T v, int, int) { \
    __atomic_compare_exchange_n(a, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                \
    return expected;                                                                                        \
  }

EMBER_TSAN_ATOMICS(8, unsigned char)
EMBER_TSAN_ATOMICS(16, unsigned short)
EMBER_TSAN_ATOMICS(32, unsigned int)
EMBER_TSAN_ATOMICS(64, unsigned long long)

EMBER_TSAN_ENTRY void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
EMBER_TSAN_ENTRY void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
