// Transform: a per-example operation on one example's data, applied to raw contiguous CPU buffers
// so the DataLoader can write its output straight into the example's slot of a batch. Compose
// chains transforms through per-thread scratch buffers. Randomness comes only from the
// ExampleRandom passed in, i.e. from (seed, epoch, index): results never depend on threads.
//
//   auto augment = std::make_shared<ember::data::Compose>(
//       ember::data::RandomCrop(32, 4), ember::data::RandomHorizontalFlip(),
//       ember::data::ToFloat(), ember::data::Normalize({0.49f, 0.48f, 0.45f}, {0.25f, 0.24f, 0.26f}));
//   Tensor out = (*augment)(image, /*seed=*/0, /*epoch=*/3, /*index=*/17);   // [3, 32, 32] float32
#pragma once

#include <memory>
#include <type_traits>
#include <vector>

#include "core/tensor.h"
#include "data/example_random.h"
#include "data/image.h"

namespace ember::data {

// The dtype and shape of one example's data.
struct TensorSpec {
  Shape shape;
  DType dtype = kFloat32;
  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype); }
  bool operator==(const TensorSpec& other) const { return shape == other.shape && dtype == other.dtype; }
};

TensorSpec spec_of(const Tensor& t);

class Transform {
 public:
  virtual ~Transform() = default;
  // The output's spec for an input of `input`; raises naming the transform when it does not apply
  // (wrong dtype, wrong dim count, crop larger than the padded image, ...).
  virtual TensorSpec output_spec(const TensorSpec& input) const = 0;
  // Reads a contiguous input of spec `input` at `src` and writes the contiguous output, of spec
  // output_spec(input), to `dst`. The buffers never overlap. Must be thread-safe (const, no
  // shared mutable state): the DataLoader's workers call it concurrently.
  virtual void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const = 0;

  // The same for an image still encoded (an ImageFolder example). The defaults decode the whole
  // image to [C, H, W] uint8 and go on as above; the resizing transforms decode only what they
  // keep (data/image_transforms.h).
  virtual TensorSpec output_spec(const EncodedImage& image) const;
  virtual void apply(const EncodedImage& image, void* dst, ExampleRandom& random) const;

  // Convenience for one CPU tensor: allocates the output.
  Tensor operator()(const Tensor& input, ExampleRandom& random) const;
  Tensor operator()(const Tensor& input, uint64_t seed, int64_t epoch, int64_t index) const;
};

using TransformPtr = std::shared_ptr<const Transform>;

// An encoded image decoded whole: its spec ([C, H, W] uint8) and the planar pixels written to dst.
TensorSpec decoded_spec(const EncodedImage& image);
void decode_planar(const EncodedImage& image, void* dst);

// The transforms in order; nested Composes are flattened. An empty Compose copies its input.
class Compose : public Transform {
 public:
  explicit Compose(std::vector<TransformPtr> transforms);
  template <typename... Ts>
  requires(sizeof...(Ts) > 0 && (std::is_base_of_v<Transform, Ts> && ...)) explicit Compose(Ts... transforms)
      : Compose(std::vector<TransformPtr>{std::make_shared<const Ts>(std::move(transforms))...}) {}

  TensorSpec output_spec(const TensorSpec& input) const override;
  void apply(const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const override;
  // The first transform takes the encoded image, the rest its output.
  TensorSpec output_spec(const EncodedImage& image) const override;
  void apply(const EncodedImage& image, void* dst, ExampleRandom& random) const override;
  const std::vector<TransformPtr>& transforms() const { return transforms_; }

 private:
  // Runs transforms_[first..] on `src` of spec `input`.
  void apply_from(size_t first, const void* src, const TensorSpec& input, void* dst, ExampleRandom& random) const;

  std::vector<TransformPtr> transforms_;
};

}  // namespace ember::data
