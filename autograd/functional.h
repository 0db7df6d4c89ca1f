// Differentiable neural-net functions (PyTorch's torch::nn::functional): convolution, pooling,
// normalisation, activations, dropout, losses, embedding. Each records its own backward.
//
//   Tensor h = ember::conv2d(x, w, b, /*stride=*/1, /*padding=*/1);
//   h = ember::relu(ember::batch_norm(h, mean, var, gamma, beta, /*training=*/true));
//   Tensor loss = ember::cross_entropy(logits, labels, {}, ember::Reduction::Mean, -100, 0.1);
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <utility>

#include "core/random.h"
#include "core/tensor.h"

namespace ember {

// A pair (h, w) that also accepts one number for both, like PyTorch's ExpandingArray<2>.
struct Size2 {
  int64_t h = 0, w = 0;
  Size2(int64_t both) : h(both), w(both) {}  // NOLINT: conv2d(x, w, {}, 2)
  Size2(int64_t height, int64_t width) : h(height), w(width) {}
  Size2(std::initializer_list<int64_t> values);
};

enum class Reduction { None, Mean, Sum };

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = {});
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, Size2 stride = 1, Size2 padding = 0,
              Size2 dilation = 1, int64_t groups = 1);

// stride defaults to the kernel size.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Size2 kernel,
                                                  std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                                                  Size2 dilation = 1, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& input, Size2 kernel, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  Size2 dilation = 1, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& input, Size2 kernel, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size);

// Combines batch-norm statistics across processes (SyncBatchNorm); the parallel package
// implements it over a ProcessGroup. Calls happen in the same order on every process.
class BatchNormStatsReducer {
 public:
  virtual ~BatchNormStatsReducer() = default;
  // In: this process's per-channel mean and biased variance over `count` values each.
  // Out: the same over all processes' values.
  virtual void reduce_stats(Tensor& mean, Tensor& var, int64_t& count) = 0;
  // Sums the backward's per-channel sums over all processes, in place.
  virtual void reduce_grad_sums(Tensor& sum_dy, Tensor& sum_dy_xmu) = 0;
};

// Training: normalises with the batch statistics over all dims but 1 and, when running stats are
// given, updates them in place with `momentum` (running_var gets the unbiased variance).
// Evaluation: normalises with the running statistics.
// With a `reducer` (training only), the statistics are those of the global batch across processes.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5,
                  std::shared_ptr<BatchNormStatsReducer> reducer = nullptr);
// relu(batch_norm(...)) in one pass forward and backward (the output saved for the mask instead of
// a second activation-sized tensor); same arguments and results as the two ops in sequence.
Tensor batch_norm_relu(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5,
                       std::shared_ptr<BatchNormStatsReducer> reducer = nullptr);
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// Zeroes elements with probability p and scales the rest by 1 / (1 - p); identity when !training.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true, Generator* generator = nullptr);

Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor silu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// input [N, C] or [N, C, d1, ...] logits; target int64 class indices [N] or [N, d1, ...].
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     Reduction reduction = Reduction::Mean, int64_t ignore_index = -100, double label_smoothing = 0.0);
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                Reduction reduction = Reduction::Mean, int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                        const Tensor& pos_weight = {}, Reduction reduction = Reduction::Mean);

// Rows of `weight` [num, dim] picked by int64 `indices` (any shape); rows equal to padding_idx
// get no gradient.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);
Tensor gather(const Tensor& input, int64_t dim, const Tensor& index);
// self with src added at index along dim (out of place).
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

}  // namespace ember
