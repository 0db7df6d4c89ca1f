// CPU reductions. Each output element folds its reduced elements with an accumulator (double for
// floating sums, so f32 sums stay accurate); contiguous runs use multi-lane float partial sums the
// compiler vectorises (bf16 runs widened to float32 first). Few outputs with long reductions split
// the reduction across threads; sums over outer dims with a contiguous kept dim accumulate whole
// rows at a time.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/cpu/simd/kernels.h"
#include "core/cpu/thread_pool.h"
#include "core/reduce_math.h"

namespace ember::cpu {

namespace {

// The shared algebra (core/reduce_math.h) plus the CPU's vectorisable fold of a contiguous run.
template <typename T, ReduceOp Op>
struct Reducer : formula::Reducer<T, Op> {
  using Base = formula::Reducer<T, Op>;
  using Base::add;
  using typename Base::Acc;
  using typename Base::C;

  // A contiguous run; sums of floats use 16 float lanes per block of 1024, merged in double; bf16
  // runs are widened to float32 a block at a time by the vector casts, then summed the same way.
  void add_contiguous(Acc& acc, const T* x, int64_t n) const {
    if constexpr ((Op == ReduceOp::Sum || Op == ReduceOp::Mean) && std::is_same_v<T, BFloat16>) {
      alignas(64) float block[1024];
      const Reducer<float, Op> floats;
      for (int64_t i = 0; i < n; i += 1024) {
        const int64_t m = std::min<int64_t>(1024, n - i);
        simd::to_float(x + i, block, m);
        floats.add_contiguous(acc, block, m);
      }
    } else if constexpr ((Op == ReduceOp::Sum || Op == ReduceOp::Mean) && std::is_same_v<T, float>) {
      int64_t i = 0;
      while (i + 16 <= n) {
        float lanes[16] = {};
        int64_t stop = std::min<int64_t>(n, i + 1024) & ~int64_t(15);
        if (stop <= i) break;
        for (; i < stop; i += 16)
          for (int j = 0; j < 16; ++j) lanes[j] += x[i + j];
        double block = 0;
        for (int j = 0; j < 16; ++j) block += lanes[j];
        acc += block;
      }
      for (; i < n; ++i) acc += x[i];
    } else if constexpr ((Op == ReduceOp::Sum || Op == ReduceOp::Mean) && std::is_same_v<T, double>) {
      double lanes[8] = {};
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) lanes[j] += x[i + j];
      for (int j = 0; j < 8; ++j) acc += lanes[j];
      for (; i < n; ++i) acc += x[i];
    } else {
      for (int64_t i = 0; i < n; ++i) add(acc, static_cast<C>(x[i]));
    }
  }
};

// Folds reduced linear indices [lo, hi) of the reduction starting at `base` into acc.
template <typename T, typename R>
void fold_range(const R& r, typename R::Acc& acc, const ReduceLoop& loop, const char* base, int64_t lo, int64_t hi) {
  if (lo >= hi) return;
  const int nr = loop.nreduced;
  if (nr == 0) {
    r.add(acc, static_cast<typename R::C>(*reinterpret_cast<const T*>(base)));
    return;
  }
  int64_t index[kMaxLoopDims] = {};
  int64_t rest = lo;
  const char* ptr = base;
  for (int d = 0; d < nr; ++d) {
    index[d] = rest % loop.reduced_sizes[d];
    rest /= loop.reduced_sizes[d];
    ptr += index[d] * loop.reduced_in_strides[d];
  }
  const int64_t inner = loop.reduced_sizes[0], s0 = loop.reduced_in_strides[0];
  int64_t remaining = hi - lo;
  while (remaining > 0) {
    int64_t n = std::min(inner - index[0], remaining);
    if (s0 == static_cast<int64_t>(sizeof(T))) {
      r.add_contiguous(acc, reinterpret_cast<const T*>(ptr), n);
    } else {
      for (int64_t i = 0; i < n; ++i) r.add(acc, static_cast<typename R::C>(*reinterpret_cast<const T*>(ptr + i * s0)));
    }
    remaining -= n;
    if (remaining == 0) break;
    ptr -= index[0] * s0;
    index[0] = 0;
    for (int d = 1; d < nr; ++d) {
      ++index[d];
      ptr += loop.reduced_in_strides[d];
      if (index[d] < loop.reduced_sizes[d]) break;
      ptr -= loop.reduced_sizes[d] * loop.reduced_in_strides[d];
      index[d] = 0;
    }
  }
}

// Offsets (bytes) of kept linear index k in the input and output.
inline void kept_offsets(const ReduceLoop& loop, int64_t k, int64_t* in_off, int64_t* out_off, int64_t* out2_off) {
  int64_t i = 0, o = 0, o2 = 0;
  for (int d = 0; d < loop.nkept; ++d) {
    int64_t idx = k % loop.kept_sizes[d];
    k /= loop.kept_sizes[d];
    i += idx * loop.kept_in_strides[d];
    o += idx * loop.kept_out_strides[d];
    o2 += idx * loop.kept_out2_strides[d];
  }
  *in_off = i;
  *out_off = o;
  if (out2_off) *out2_off = o2;
}

// Sum/mean over outer dims into a contiguous kept dim: accumulate whole input rows.
template <typename T, typename Out, typename R>
bool try_row_accumulate(const R& r, const ReduceLoop& loop) {
  if constexpr (!std::is_floating_point_v<typename R::C>) {
    return false;
  } else {
    if (loop.nkept < 1 || loop.nreduced < 1) return false;
    if (loop.kept_in_strides[0] != static_cast<int64_t>(sizeof(T)) ||
        loop.kept_out_strides[0] != static_cast<int64_t>(sizeof(Out)))
      return false;
    if (loop.reduced_in_strides[0] == static_cast<int64_t>(sizeof(T))) return false;
    const int64_t width = loop.kept_sizes[0];
    const int64_t outer = loop.kept_numel / width;
    const int64_t tile = 256;
    const int64_t tiles_per_row = (width + tile - 1) / tile;
    parallel_for(0, outer * tiles_per_row,
                 std::max<int64_t>(1, 65536 / std::max<int64_t>(1, loop.reduced_numel * tile)),
                 [&](int64_t lo, int64_t hi) {
                   double acc[tile];
                   for (int64_t t = lo; t < hi; ++t) {
                     int64_t row = t / tiles_per_row, j0 = (t % tiles_per_row) * tile, n = std::min(tile, width - j0);
                     int64_t in_off, out_off;
                     kept_offsets(loop, row * width + j0, &in_off, &out_off, nullptr);
                     for (int64_t j = 0; j < n; ++j) acc[j] = 0;
                     int64_t index[kMaxLoopDims] = {};
                     const char* ptr = loop.in + in_off;
                     for (int64_t rr = 0; rr < loop.reduced_numel; ++rr) {
                       const T* x = reinterpret_cast<const T*>(ptr);
                       for (int64_t j = 0; j < n; ++j) acc[j] += static_cast<double>(static_cast<typename R::C>(x[j]));
                       for (int d = 0; d < loop.nreduced; ++d) {
                         ++index[d];
                         ptr += loop.reduced_in_strides[d];
                         if (index[d] < loop.reduced_sizes[d]) break;
                         ptr -= loop.reduced_sizes[d] * loop.reduced_in_strides[d];
                         index[d] = 0;
                       }
                     }
                     Out* out = reinterpret_cast<Out*>(loop.out + out_off);
                     for (int64_t j = 0; j < n; ++j)
                       out[j] = r.template finish<Out>(static_cast<typename R::Acc>(acc[j]), loop.reduced_numel);
                   }
                 });
    return true;
  }
}

template <typename T, typename Out, ReduceOp Op>
void reduce_typed(const ReduceLoop& loop, double p) {
  using R = Reducer<T, Op>;
  R r;
  r.p = p;
  if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Mean) {
    if (try_row_accumulate<T, Out>(r, loop)) return;
  }
  const int threads = num_threads();
  if (loop.kept_numel < threads && loop.reduced_numel >= 65536) {
    // Few outputs, long reductions: split each reduction across threads.
    for (int64_t k = 0; k < loop.kept_numel; ++k) {
      int64_t in_off, out_off;
      kept_offsets(loop, k, &in_off, &out_off, nullptr);
      // Not std::vector: its bool specialisation cannot hand out references.
      std::unique_ptr<typename R::Acc[]> partial(new typename R::Acc[threads]);
      for (int t = 0; t < threads; ++t) partial[t] = r.init();
      parallel_for(0, threads, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t t = lo; t < hi; ++t) {
          int64_t a = loop.reduced_numel * t / threads, b = loop.reduced_numel * (t + 1) / threads;
          fold_range<T>(r, partial[t], loop, loop.in + in_off, a, b);
        }
      });
      typename R::Acc acc = partial[0];
      for (int t = 1; t < threads; ++t) r.merge(acc, partial[t]);
      *reinterpret_cast<Out*>(loop.out + out_off) = r.template finish<Out>(acc, loop.reduced_numel);
    }
    return;
  }
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, loop.reduced_numel));
  parallel_for(0, loop.kept_numel, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      int64_t in_off, out_off;
      kept_offsets(loop, k, &in_off, &out_off, nullptr);
      typename R::Acc acc = r.init();
      fold_range<T>(r, acc, loop, loop.in + in_off, 0, loop.reduced_numel);
      *reinterpret_cast<Out*>(loop.out + out_off) = r.template finish<Out>(acc, loop.reduced_numel);
    }
  });
}

template <typename T, typename Out>
void reduce_for_type(ReduceOp op, const ReduceLoop& loop, double p) {
  switch (op) {
    case ReduceOp::Sum:
      return reduce_typed<T, Out, ReduceOp::Sum>(loop, p);
    case ReduceOp::Mean:
      return reduce_typed<T, Out, ReduceOp::Mean>(loop, p);
    case ReduceOp::Prod:
      return reduce_typed<T, Out, ReduceOp::Prod>(loop, p);
    case ReduceOp::Amax:
      return reduce_typed<T, Out, ReduceOp::Amax>(loop, p);
    case ReduceOp::Amin:
      return reduce_typed<T, Out, ReduceOp::Amin>(loop, p);
    case ReduceOp::Norm:
      if constexpr (std::is_floating_point_v<ComputeType<T>>)
        return reduce_typed<T, Out, ReduceOp::Norm>(loop, p);
      else
        detail::unsupported_dtype("norm", dtype_of<T>());
    case ReduceOp::Var:
      if constexpr (std::is_floating_point_v<ComputeType<T>>)
        return reduce_typed<T, Out, ReduceOp::Var>(loop, p);
      else
        detail::unsupported_dtype("var", dtype_of<T>());
    case ReduceOp::Std:
      if constexpr (std::is_floating_point_v<ComputeType<T>>)
        return reduce_typed<T, Out, ReduceOp::Std>(loop, p);
      else
        detail::unsupported_dtype("std", dtype_of<T>());
  }
}

template <typename T>
void arg_reduce_typed(bool is_max, const ReduceLoop& loop) {
  using C = ComputeType<T>;
  const int64_t n = loop.reduced_numel;
  const int64_t stride = loop.nreduced > 0 ? loop.reduced_in_strides[0] : 0;
  parallel_for(0, loop.kept_numel, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n)), [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      int64_t in_off, out_off, out2_off;
      kept_offsets(loop, k, &in_off, &out_off, &out2_off);
      const char* base = loop.in + in_off;
      C best = C(*reinterpret_cast<const T*>(base));
      int64_t best_index = 0;
      for (int64_t i = 1; i < n; ++i) {
        C v = C(*reinterpret_cast<const T*>(base + i * stride));
        if (formula::arg_better<C>(is_max, v, best)) {
          best = v;
          best_index = i;
        }
      }
      *reinterpret_cast<T*>(loop.out + out_off) = static_cast<T>(best);
      *reinterpret_cast<int64_t*>(loop.out2 + out2_off) = best_index;
    }
  });
}

}  // namespace

void reduce_kernel(ReduceOp op, const ReduceLoop& loop, double p) {
  if (loop.out_dtype == loop.in_dtype) {
    EMBER_DISPATCH_ALL(loop.in_dtype, reduce_op_name(op), [&] { reduce_for_type<scalar_t, scalar_t>(op, loop, p); });
  } else {
    EMBER_CHECK(loop.out_dtype == kInt64, reduce_op_name(op), ": unsupported output dtype ",
                dtype_name(loop.out_dtype));
    EMBER_DISPATCH_ALL(loop.in_dtype, reduce_op_name(op), [&] { reduce_for_type<scalar_t, int64_t>(op, loop, p); });
  }
}

void arg_reduce_kernel(bool is_max, const ReduceLoop& loop) {
  EMBER_DISPATCH_ALL(loop.in_dtype, is_max ? "max" : "min", [&] { arg_reduce_typed<scalar_t>(is_max, loop); });
}

}  // namespace ember::cpu
