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

// Welford's running mean and sum of squared deviations: one pass, and partial results from
// threads, warps or blocks merge exactly (Chan et al.), where sum(x^2) - n mean^2 cancels
// catastrophically for data far from zero. No member initialisers: CUDA's __shared__ arrays need a
// trivially constructible type.
struct Welford {
  double mean;
  double m2;
  int64_t n;

  EMBER_HOST_DEVICE void add(double x) {
    ++n;
    const double delta = x - mean;
    mean += delta / static_cast<double>(n);
    m2 += delta * (x - mean);
  }

  EMBER_HOST_DEVICE void merge(const Welford& other) {
    if (other.n == 0) return;
    if (n == 0) {
      *this = other;
      return;
    }
    const double total = static_cast<double>(n + other.n);
    const double delta = other.mean - mean;
    const double weight = static_cast<double>(other.n) / total;
    mean += delta * weight;
    m2 += other.m2 + delta * delta * static_cast<double>(n) * weight;
    n += other.n;
  }

  // m2 / max(n - correction, 0): 0/0 = NaN for too few elements, as in PyTorch.
  EMBER_HOST_DEVICE double variance(double correction) const {
    const double divisor = static_cast<double>(n) - correction;
    return m2 / (divisor > 0 ? divisor : 0.0);
  }
};

template <typename T, ReduceOp Op>
struct Reducer {
  using C = ComputeType<T>;
  static constexpr bool kFloating = std::is_floating_point_v<C>;
  static constexpr bool kExtremum = Op == ReduceOp::Amax || Op == ReduceOp::Amin;
  static constexpr bool kMoments = Op == ReduceOp::Var || Op == ReduceOp::Std;
  // Floating sums accumulate in double, so that float32 sums stay accurate.
  using Acc = std::conditional_t<kMoments, Welford,
                                 std::conditional_t<kExtremum, C, std::conditional_t<kFloating, double, int64_t>>>;
  double p = 2.0;  // Norm's order; Var's and Std's correction

  EMBER_HOST_DEVICE static bool is_inf(double v) {
    return v == std::numeric_limits<double>::infinity() || v == -std::numeric_limits<double>::infinity();
  }

  EMBER_HOST_DEVICE Acc init() const {
    if constexpr (kMoments) {
      return Welford{0.0, 0.0, 0};
    } else if constexpr (Op == ReduceOp::Prod) {
      return Acc(1);
    } else if constexpr (Op == ReduceOp::Amax) {
      if constexpr (kFloating)
        return -std::numeric_limits<C>::infinity();
      else
        return std::numeric_limits<C>::lowest();
    } else if constexpr (Op == ReduceOp::Amin) {
      if constexpr (kFloating)
        return std::numeric_limits<C>::infinity();
      else
        return std::numeric_limits<C>::max();
    } else {
      if constexpr (Op == ReduceOp::Norm) {
        if (is_inf(p) && p < 0) return std::numeric_limits<double>::infinity();
      }
      return Acc(0);
    }
  }

  EMBER_HOST_DEVICE void add(Acc& acc, C x) const {
    if constexpr (kMoments)
      acc.add(static_cast<double>(x));
    else if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Mean)
      acc += static_cast<Acc>(x);
    else if constexpr (Op == ReduceOp::Prod)
      acc *= static_cast<Acc>(x);
    else if constexpr (Op == ReduceOp::Amax) {
      if constexpr (kFloating) {
        if (is_nan(x) || x > acc) acc = is_nan(acc) ? acc : x;
      } else if (x > acc)
        acc = x;
    } else if constexpr (Op == ReduceOp::Amin) {
      if constexpr (kFloating) {
        if (is_nan(x) || x < acc) acc = is_nan(acc) ? acc : x;
      } else if (x < acc)
        acc = x;
    } else if constexpr (Op == ReduceOp::Norm) {
      double a = libm::fabs(static_cast<double>(x));
      if (p == 2.0)
        acc += a * a;
      else if (p == 1.0)
        acc += a;
      else if (is_inf(p))
        acc = p > 0 ? (is_nan(a) || a > acc ? a : acc) : (is_nan(a) || a < acc ? a : acc);
      else if (p == 0.0)
        acc += a != 0.0 ? 1.0 : 0.0;
      else
        acc += libm::pow(a, p);
    }
  }

  EMBER_HOST_DEVICE void merge(Acc& acc, Acc other) const {
    if constexpr (kMoments)
      acc.merge(other);
    else if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Mean)
      acc += other;
    else if constexpr (Op == ReduceOp::Prod)
      acc *= other;
    else if constexpr (kExtremum)
      add(acc, other);
    else if constexpr (Op == ReduceOp::Norm) {
      if (is_inf(p))
        acc = p > 0 ? (is_nan(other) || other > acc ? other : acc) : (is_nan(other) || other < acc ? other : acc);
      else
        acc += other;
    }
  }

  template <typename Out>
  EMBER_HOST_DEVICE Out finish(Acc acc, int64_t count) const {
    if constexpr (kMoments) {
      const double v = acc.variance(p);
      return static_cast<Out>(static_cast<ComputeType<Out>>(Op == ReduceOp::Std ? libm::sqrt(v) : v));
    } else if constexpr (Op == ReduceOp::Mean) {
      return static_cast<Out>(static_cast<ComputeType<Out>>(static_cast<double>(acc) / static_cast<double>(count)));
    } else if constexpr (Op == ReduceOp::Norm) {
      double r = acc;
      if (p == 2.0)
        r = libm::sqrt(r);
      else if (p != 1.0 && p != 0.0 && !is_inf(p))
        r = libm::pow(r, 1.0 / p);
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
