// CPU copy kernel: any dtype to any dtype over any strides; same-dtype contiguous rows are memcpy,
// contiguous float32 <-> bf16 rows (autocast's casts) the vector loops of core/cpu/simd.
#include <cstring>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/simd/kernels.h"
#include "core/elementwise_math.h"

namespace ember::cpu {

namespace {

template <typename D, typename S>
inline D cast(S value) {
  return formula::cast<D, S>(value);
}

template <typename D, typename S>
void copy_typed(const StridedLoop& loop) {
  for_each_row(loop, kElementwiseGrain, [](int64_t n, char* const* p, const int64_t* s) {
    if constexpr (std::is_same_v<D, S>) {
      if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
        std::memcpy(p[0], p[1], static_cast<size_t>(n) * sizeof(D));
        return;
      }
    }
    if constexpr (std::is_same_v<D, float> && std::is_same_v<S, BFloat16>) {
      if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
        simd::to_float(reinterpret_cast<const BFloat16*>(p[1]), reinterpret_cast<float*>(p[0]), n);
        return;
      }
    }
    if constexpr (std::is_same_v<D, BFloat16> && std::is_same_v<S, float>) {
      if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
        simd::from_float(reinterpret_cast<const float*>(p[1]), reinterpret_cast<BFloat16*>(p[0]), n);
        return;
      }
    }
    if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
      D* out = reinterpret_cast<D*>(p[0]);
      const S* in = reinterpret_cast<const S*>(p[1]);
      for (int64_t i = 0; i < n; ++i) out[i] = cast<D, S>(in[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<D*>(p[0] + i * s[0]) = cast<D, S>(*reinterpret_cast<const S*>(p[1] + i * s[1]));
    }
  });
}

template <typename D>
void copy_to(const StridedLoop& loop) {
  EMBER_DISPATCH_ALL(loop.dtypes[1], "copy_", [&] { copy_typed<D, scalar_t>(loop); });
}

}  // namespace

void copy_kernel(const StridedLoop& loop) {
  EMBER_DISPATCH_ALL(loop.dtypes[0], "copy_", [&] { copy_to<scalar_t>(loop); });
}

}  // namespace ember::cpu
