// Embedding: N(0, 1) initialisation (padding row zeroed) and lookup.
#include "nn/modules/embedding.h"

#include "autograd/functional.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "nn/init.h"

namespace ember::nn {

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& options_in) : Cloneable("Embedding"), options(options_in) {
  EMBER_CHECK(options.num_embeddings() > 0 && options.embedding_dim() > 0,
              "Embedding: num_embeddings and embedding_dim must be positive");
  if (options.padding_idx()) {
    int64_t p = *options.padding_idx();
    EMBER_CHECK(p >= -options.num_embeddings() && p < options.num_embeddings(),
                "Embedding: padding_idx must be within num_embeddings (", options.num_embeddings(), "), got ", p);
    if (p < 0) options.padding_idx(p + options.num_embeddings());
  }
  reset();
}

void EmbeddingImpl::reset() {
  weight = register_parameter("weight", empty({options.num_embeddings(), options.embedding_dim()}));
  init::normal_(weight);
  if (options.padding_idx()) {
    NoGradGuard no_grad;
    weight.select(0, *options.padding_idx()).fill_(0);
  }
}

Tensor EmbeddingImpl::forward(const Tensor& indices) {
  // embedding's row gather takes the indices from any device as they are.
  check_input_device(type_name(), indices, weight);
  return embedding(weight, indices, options.padding_idx());
}

std::string EmbeddingImpl::extra_repr() const {
  std::string s = std::to_string(options.num_embeddings()) + ", " + std::to_string(options.embedding_dim());
  if (options.padding_idx()) s += ", padding_idx=" + std::to_string(*options.padding_idx());
  return s;
}

}  // namespace ember::nn
