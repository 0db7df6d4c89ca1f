// Embedding: a [num_embeddings, embedding_dim] table looked up by int64 indices.
#pragma once

#include <optional>

#include "nn/module.h"
#include "nn/options.h"

namespace ember::nn {

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  EMBER_ARG(int64_t, num_embeddings);
  EMBER_ARG(int64_t, embedding_dim);
  EMBER_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;  // that row starts at 0 and gets no gradient
};

class EmbeddingImpl : public Cloneable<EmbeddingImpl> {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  void reset() override;
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;

  EmbeddingOptions options;
  Tensor weight;
};
EMBER_MODULE(Embedding);

}  // namespace ember::nn
