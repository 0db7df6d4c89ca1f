// What the CPU batch-norm passes share (batch_norm_kernels.cc, and batch_norm_bf16.cc for bf16
// activations on the vector loops): the [N, C, S] view of a tensor in memory, channels outermost
// (NCHW) or innermost (channels-last), and per-channel sums over a channels-last block split
// between threads.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember::cpu::batch_norm {

// How the [N, C, S] view of a tensor is laid out in memory.
struct Layout {
  bool channels_last = false;  // element (n, c, s) at (n*S + s)*C + c, else (n*C + c)*S + s
  int64_t n = 1, c = 1, s = 1;
};

// `t` made contiguous or channels-last dense (matching `like` when given), and described.
Tensor normalise_layout(const Tensor& t, const Tensor* like, Layout* layout);

// Per-channel sums over a channels-last [rows, C] block: each thread adds its own share of rows
// [r0, r1) into its own accumulators (`terms(r0, r1, acc)`, acc holding kTerms arrays of C), then
// the threads' partial sums are added. Reading channel by channel instead would fetch every cache
// line C times.
template <int kTerms, typename Terms>
std::vector<double> channels_last_sums(int64_t rows, int64_t channels, const Terms& terms);

// The vector passes over bf16 activations with float32 statistics, parameters and sums
// (batch_norm_bf16.cc). `takes` says whether they run: every activation operand bf16 (undefined
// ones aside) and simd::available(). Results as the entries of core/kernel_entries.inc return them.
bool bf16_takes(std::initializer_list<const Tensor*> activations);
std::pair<Tensor, Tensor> bf16_stats(const Tensor& input);
Tensor bf16_apply(const Tensor& input, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                  const Tensor& bias, bool relu);
std::pair<Tensor, Tensor> bf16_backward_reduce(const Tensor& grad_output, const Tensor& input, const Tensor& mean,
                                               const Tensor& relu_output);
Tensor bf16_backward_input(const Tensor& grad_output, const Tensor& input, const Tensor& mean, const Tensor& invstd,
                           const Tensor& weight, const Tensor& sum_dy, const Tensor& sum_dy_xmu, int64_t count,
                           const Tensor& relu_output);

}  // namespace ember::cpu::batch_norm

#include "core/cpu/thread_pool.h"

namespace ember::cpu::batch_norm {

template <int kTerms, typename Terms>
std::vector<double> channels_last_sums(int64_t rows, int64_t channels, const Terms& terms) {
  const int threads = std::max(1, num_threads());
  std::vector<double> partial(static_cast<size_t>(threads) * kTerms * channels, 0.0);
  parallel_for(0, threads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      terms(rows * t / threads, rows * (t + 1) / threads, partial.data() + t * kTerms * channels);
  });
  std::vector<double> total(static_cast<size_t>(kTerms) * channels, 0.0);
  for (int t = 0; t < threads; ++t)
    for (size_t i = 0; i < total.size(); ++i) total[i] += partial[t * total.size() + i];
  return total;
}

}  // namespace ember::cpu::batch_norm
