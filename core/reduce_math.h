// The algebra of each reduction (its accumulator, identity, fold, merge of partial results and
// final value) and of the arg reductions, shared by every backend: the CPU folds ranges per
// thread, the CUDA kernels fold per thread and merge across a block, and both compute each value
// here. EMBER_HOST_DEVICE, like core/elementwise_math.h.
#pragma once

#include <limits>
#include <type_traits>

#include "core/dtype.h"
#include "core/elementwise_math.h"
#include "core/op_kinds.h"

namespace ember::formula {

template <typename T, ReduceOp Op>
struct Reducer {
  using C = ComputeType<T>;
  static constexpr bool kFloating = std::is_floating_point_v<C>;
  static constexpr bool kExtremum = Op == ReduceOp::Amax || Op == ReduceOp::Amin;
  // Floating sums accumulate in double, so that float32 sums stay accurate.
  using Acc = std::conditional_t<kExtremum, C, std::conditional_t<kFloating, double, int64_t>>;
  double p = 2.0;

  EMBER_HOST_DEVICE static bool is_inf(double v) { return v == std::numeric_limits<double>::infinity() || v == -std::numeric_limits<double>::infinity(); }

  EMBER_HOST_DEVICE Acc init() const {
    if constexpr (Op == ReduceOp::Prod) return Acc(1);
    if constexpr (Op == ReduceOp::Amax) {
      if constexpr (kFloating) return -std::numeric_limits<C>::infinity();
      else return std::numeric_limits<C>::lowest();
    }
    if constexpr (Op == ReduceOp::Amin) {
      if constexpr (kFloating) return std::numeric_limits<C>::infinity();
      else return std::numeric_limits<C>::max();
    }
    if constexpr (Op == ReduceOp::Norm) {
      if (is_inf(p) && p < 0) return std::numeric_limits<double>::infinity();
    }
    return Acc(0);
  }

  EMBER_HOST_DEVICE void add(Acc& acc, C x) const {
    if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Mean) acc += static_cast<Acc>(x);
    else if constexpr (Op == ReduceOp::Prod) acc *= static_cast<Acc>(x);
    else if constexpr (Op == ReduceOp::Amax) {
      if constexpr (kFloating) {
        if (is_nan(x) || x > acc) acc = is_nan(acc) ? acc : x;
      } else if (x > acc) acc = x;
    } else if constexpr (Op == ReduceOp::Amin) {
      if constexpr (kFloating) {
        if (is_nan(x) || x < acc) acc = is_nan(acc) ? acc : x;
      } else if (x < acc) acc = x;
    } else if constexpr (Op == ReduceOp::Norm) {
      double a = libm::fabs(static_cast<double>(x));
      if (p == 2.0) acc += a * a;
      else if (p == 1.0) acc += a;
      else if (is_inf(p)) acc = p > 0 ? (is_nan(a) || a > acc ? a : acc) : (is_nan(a) || a < acc ? a : acc);
      else if (p == 0.0) acc += a != 0.0 ? 1.0 : 0.0;
      else acc += libm::pow(a, p);
    }
  }

  EMBER_HOST_DEVICE void merge(Acc& acc, Acc other) const {
    if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Mean) acc += other;
    else if constexpr (Op == ReduceOp::Prod) acc *= other;
    else if constexpr (kExtremum) add(acc, other);
    else if constexpr (Op == ReduceOp::Norm) {
      if (is_inf(p)) acc = p > 0 ? (is_nan(other) || other > acc ? other : acc)
                                 : (is_nan(other) || other < acc ? other : acc);
      else acc += other;
    }
  }

  template <typename Out>
  EMBER_HOST_DEVICE Out finish(Acc acc, int64_t count) const {
    if constexpr (Op == ReduceOp::Mean) {
      return static_cast<Out>(static_cast<ComputeType<Out>>(static_cast<double>(acc) / static_cast<double>(count)));
    } else if constexpr (Op == ReduceOp::Norm) {
      double r = acc;
      if (p == 2.0) r = libm::sqrt(r);
      else if (p != 1.0 && p != 0.0 && !is_inf(p)) r = libm::pow(r, 1.0 / p);
      return static_cast<Out>(static_cast<ComputeType<Out>>(r));
    } else {
      return static_cast<Out>(static_cast<ComputeType<Out>>(acc));
    }
  }
};

// Arg reductions: whether v at a later index replaces the best so far. The first NaN wins, as in
// PyTorch; among equal values the first index.
template <typename C>
EMBER_HOST_DEVICE inline bool arg_better(bool is_max, C v, C best) {
  if constexpr (std::is_floating_point_v<C>) {
    if (is_nan(best)) return false;
    return is_nan(v) || (is_max ? v > best : v < best);
  } else {
    return is_max ? v > best : v < best;
  }
}

// Two partial results (value, index) of an arg reduction merged in either order: the same choice
// a left-to-right scan makes.
template <typename C>
EMBER_HOST_DEVICE inline bool arg_merge_takes_other(bool is_max, C best, int64_t index, C other, int64_t other_index) {
  if constexpr (std::is_floating_point_v<C>) {
    if (is_nan(best) || is_nan(other)) return is_nan(other) && (!is_nan(best) || other_index < index);
  }
  if (other == best) return other_index < index;
  return is_max ? other > best : other < best;
}

}  // namespace ember::formula
