// Transform's tensor convenience calls and Compose's ping-pong through per-thread scratch buffers.
#include "data/transform.h"

#include <cstring>

#include "core/error.h"
#include "core/factory.h"

namespace ember::data {

TensorSpec spec_of(const Tensor& t) { return {t.sizes(), t.dtype()}; }

Tensor Transform::operator()(const Tensor& input, ExampleRandom& random) const {
  EMBER_CHECK(input.defined() && input.device().is_cpu(), "Transform: expected a defined CPU tensor, got ",
              input.defined() ? input.device().str() : std::string("an undefined tensor"));
  Tensor src = input.contiguous();
  TensorSpec in = spec_of(src);
  TensorSpec out = output_spec(in);
  Tensor result = empty(out.shape, TensorOptions(out.dtype));
  apply(src.data_ptr(), in, result.data_ptr(), random);
  return result;
}

Tensor Transform::operator()(const Tensor& input, uint64_t seed, int64_t epoch, int64_t index) const {
  ExampleRandom random(seed, epoch, index);
  return (*this)(input, random);
}

Compose::Compose(std::vector<TransformPtr> transforms) {
  for (size_t k = 0; k < transforms.size(); ++k) {
    EMBER_CHECK(transforms[k] != nullptr, "Compose: transforms[", k, "] is null");
    if (auto* nested = dynamic_cast<const Compose*>(transforms[k].get())) {
      transforms_.insert(transforms_.end(), nested->transforms_.begin(), nested->transforms_.end());
    } else {
      transforms_.push_back(std::move(transforms[k]));
    }
  }
}

TensorSpec Compose::output_spec(const TensorSpec& input) const {
  TensorSpec spec = input;
  for (const TransformPtr& t : transforms_) spec = t->output_spec(spec);
  return spec;
}

namespace {

// Two buffers per nesting level, so a Transform whose apply() runs a Compose of its own does not
// overwrite the buffers of the Compose that called it. Per thread, reused for every example.
struct Scratch {
  std::vector<uint8_t> buffers[2];
};
thread_local std::vector<std::unique_ptr<Scratch>> scratch_levels;
thread_local size_t scratch_depth = 0;

struct ScratchLevel {
  Scratch& scratch;
  ScratchLevel() : scratch(acquire()) {}
  ~ScratchLevel() { --scratch_depth; }
  static Scratch& acquire() {
    if (scratch_levels.size() <= scratch_depth) scratch_levels.push_back(std::make_unique<Scratch>());
    return *scratch_levels[scratch_depth++];
  }
};

}  // namespace

void Compose::apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const {
  if (transforms_.empty()) {
    std::memcpy(dst, src, input.nbytes());
    return;
  }
  ScratchLevel level;
  const void* in_data = src;
  TensorSpec in_spec = input;
  for (size_t k = 0; k < transforms_.size(); ++k) {
    const bool last = k + 1 == transforms_.size();
    TensorSpec out_spec = last ? TensorSpec() : transforms_[k]->output_spec(in_spec);
    void* out_data = dst;
    if (!last) {
      std::vector<uint8_t>& buffer = level.scratch.buffers[k % 2];
      if (buffer.size() < out_spec.nbytes()) buffer.resize(out_spec.nbytes());
      out_data = buffer.data();
    }
    transforms_[k]->apply(in_data, in_spec, out_data, random);
    in_data = out_data;
    in_spec = std::move(out_spec);
  }
}

}  // namespace ember::data
