// AddressSanitizer's manual poisoning of device memory (cuda/emu/memory.cc's redzones, the checking
// mode's guards); nothing without AddressSanitizer.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define EMBER_EMU_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define EMBER_EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define EMBER_EMU_POISON(p, n) ((void)(p), (void)(n))
#define EMBER_EMU_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
