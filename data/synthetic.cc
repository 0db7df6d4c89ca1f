// SyntheticDataset: each example's stream is keyed by (seed, index); the label is drawn first,
// then the pixels, four random words per Philox call.
#include "data/synthetic.h"

#include <cstring>

#include "core/error.h"
#include "core/factory.h"
#include "data/example_random.h"

namespace ember::data {

namespace {

// Keeps synthetic streams apart from the transform streams, which use (seed, epoch, index).
constexpr uint64_t kSyntheticDomain = 0x53594e5448455449ull;  // "SYNTHETI"

}  // namespace

SyntheticDataset::SyntheticDataset(int64_t size, Shape image_shape, int64_t num_classes, uint64_t seed, DType dtype)
    : size_(size), image_shape_(std::move(image_shape)), num_classes_(num_classes), seed_(seed), dtype_(dtype) {
  EMBER_CHECK(size_ >= 0, "SyntheticDataset: size must be >= 0, got ", size_);
  EMBER_CHECK(num_classes_ >= 1, "SyntheticDataset: num_classes must be >= 1, got ", num_classes_);
  EMBER_CHECK(dtype_ == kUInt8 || dtype_ == kFloat32, "SyntheticDataset: dtype must be uint8 or float32, got ",
              dtype_name(dtype_));
  for (int64_t extent : image_shape_) {
    EMBER_CHECK(extent > 0, "SyntheticDataset: image shape must have positive dims, got ", shape_str(image_shape_));
  }
}

Example SyntheticDataset::get(int64_t index) const {
  check_index("SyntheticDataset::get", index, size_);
  ExampleRandom random(derive_key(seed_, kSyntheticDomain, static_cast<uint64_t>(index)));
  int64_t label = random.randint(0, num_classes_);
  Tensor image = empty(image_shape_, TensorOptions(dtype_));
  int64_t n = image.numel();
  if (dtype_ == kUInt8) {
    uint8_t* out = image.data_ptr<uint8_t>();
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      uint32_t word = random.next_u32();
      std::memcpy(out + i, &word, 4);
    }
    if (i < n) {
      uint32_t word = random.next_u32();
      std::memcpy(out + i, &word, static_cast<size_t>(n - i));
    }
  } else {
    float* out = image.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) out[i] = random.uniform();
  }
  return {image, full({}, label, TensorOptions(kInt64))};
}

}  // namespace ember::data
