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
  apply_from(0, src, input, dst, random);
}

void Compose::apply_from(size_t first, const void* src, const TensorSpec& input, void* dst,
                         ExampleRandom& random) const {
  ScratchLevel level;
  const void* in_data = src;
  TensorSpec in_spec = input;
  for (size_t k = first; k < transforms_.size(); ++k) {
    const bool last = k + 1 == transforms_.size();
    TensorSpec out_spec = last ? TensorSpec() : transforms_[k]->output_spec(in_spec);
    void* out_data = dst;
    if (!last) {
      std::vector<uint8_t>& buffer = level.scratch.buffers[(k - first) % 2];
      if (buffer.size() < out_spec.nbytes()) buffer.resize(out_spec.nbytes());
      out_data = buffer.data();
    }
    transforms_[k]->apply(in_data, in_spec, out_data, random);
    in_data = out_data;
    in_spec = std::move(out_spec);
  }
}

TensorSpec Compose::output_spec(const EncodedImage& image) const {
  if (transforms_.empty()) return Transform::output_spec(image);
  TensorSpec spec = transforms_[0]->output_spec(image);
  for (size_t k = 1; k < transforms_.size(); ++k) spec = transforms_[k]->output_spec(spec);
  return spec;
}

void Compose::apply(const EncodedImage& image, void* dst, ExampleRandom& random) const {
  if (transforms_.size() <= 1) {
    if (transforms_.empty()) {
      Transform::apply(image, dst, random);
    } else {
      transforms_[0]->apply(image, dst, random);
    }
    return;
  }
  // The first output takes this level's buffer; apply_from works one level deeper.
  const TensorSpec first = transforms_[0]->output_spec(image);
  ScratchLevel level;
  std::vector<uint8_t>& buffer = level.scratch.buffers[0];
  if (buffer.size() < first.nbytes()) buffer.resize(first.nbytes());
  transforms_[0]->apply(image, buffer.data(), random);
  apply_from(1, buffer.data(), first, dst, random);
}

TensorSpec decoded_spec(const EncodedImage& image) {
  return {{image.channels, image.header.height, image.header.width}, kUInt8};
}

void decode_planar(const EncodedImage& image, void* dst) {
  DecodedImage decoded = image.decode();
  EMBER_CHECK(decoded.width == image.header.width && decoded.height == image.header.height, "decode: ", image.name,
              ": decoded ", decoded.width, "x", decoded.height, " pixels, but the header says ", image.header.width,
              "x", image.header.height);
  const int64_t pixels = decoded.width * decoded.height, C = decoded.channels;
  const uint8_t* in = decoded.pixels.data();
  auto* out = static_cast<uint8_t*>(dst);
  if (C == 1) {
    std::memcpy(out, in, static_cast<size_t>(pixels));
    return;
  }
  for (int64_t c = 0; c < C; ++c) {
    uint8_t* __restrict plane = out + c * pixels;
    for (int64_t i = 0; i < pixels; ++i) plane[i] = in[i * C + c];
  }
}

TensorSpec Transform::output_spec(const EncodedImage& image) const { return output_spec(decoded_spec(image)); }

void Transform::apply(const EncodedImage& image, void* dst, ExampleRandom& random) const {
  const TensorSpec spec = decoded_spec(image);
  std::vector<uint8_t> planar(spec.nbytes());
  decode_planar(image, planar.data());
  apply(planar.data(), spec, dst, random);
}

}  // namespace ember::data
