#include "core/cpu/streaming_stores.h"

#include <emmintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ember::cpu {

size_t last_level_cache_bytes() {
  static const size_t bytes = [] {
    if (std::FILE* f = std::fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r")) {
      unsigned long kb = 0;
      const bool read = std::fscanf(f, "%luK", &kb) == 1;
      std::fclose(f);
      if (read && kb > 0) return static_cast<size_t>(kb) << 10;
    }
    const long reported = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return reported > 0 ? static_cast<size_t>(reported) : size_t{32} << 20;
  }();
  return bytes;
}

bool streaming_output_preferred(int64_t bytes) {
  return bytes > 0 && static_cast<size_t>(bytes) >= 2 * last_level_cache_bytes();
}

void stream_copy(void* dst, const void* src, int64_t bytes) {
  char* to = static_cast<char*>(dst);
  const char* from = static_cast<const char*>(src);
  const int64_t head = std::min<int64_t>(bytes, (16 - reinterpret_cast<uintptr_t>(to) % 16) % 16);
  std::memcpy(to, from, static_cast<size_t>(head));
  int64_t i = head;
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i)));
  std::memcpy(to + i, from + i, static_cast<size_t>(bytes - i));
}

void stream_fence() { _mm_sfence(); }

}  // namespace ember::cpu
