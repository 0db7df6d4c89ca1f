// assemble_batch: sizes the batch from its first example, then fills slot after slot.
#include "data/batch.h"

#include <cstring>

#include "core/error.h"
#include "core/factory.h"
#include "data/image_folder.h"

namespace ember::data {

namespace {

// Contiguous CPU data of the expected spec: a view of the example when it already is contiguous.
Tensor checked_example_tensor(const Tensor& t, const TensorSpec& expected, const char* what, int64_t index,
                              int64_t first_index) {
  EMBER_CHECK(t.defined(), "DataLoader: example ", index, " has an undefined ", what, ", but example ", first_index,
              " (the batch's first) has one of shape ", shape_str(expected.shape));
  EMBER_CHECK(t.device().is_cpu(), "DataLoader: example ", index, "'s ", what, " is on ", t.device().str(),
              ", expected a CPU tensor (move batches to the device after loading)");
  EMBER_CHECK(t.sizes() == expected.shape && t.dtype() == expected.dtype, "DataLoader: example ", index, "'s ", what,
              " is ", shape_str(t.sizes()), " ", dtype_name(t.dtype()), ", but the batch's first example (",
              first_index, ") has ", shape_str(expected.shape), " ", dtype_name(expected.dtype),
              "; a batch needs examples of one shape and dtype");
  return t.is_contiguous() ? t : t.contiguous();
}

Shape batched(int64_t batch, const Shape& shape) {
  Shape out{batch};
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

// NCHW planes to NHWC rows.
template <typename Element>
void transpose_planes(const Tensor& nchw, const Tensor& nhwc) {
  const int64_t n = nchw.size(0), c = nchw.size(1), pixels = nchw.size(2) * nchw.size(3);
  const auto* in = static_cast<const Element*>(nchw.data_ptr());
  auto* out = static_cast<Element*>(nhwc.data_ptr());
  for (int64_t b = 0; b < n; ++b, in += c * pixels, out += c * pixels)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < pixels; ++p) out[p * c + ch] = in[ch * pixels + p];
}

}  // namespace

Tensor channels_last_copy(const Tensor& nchw) {
  EMBER_CHECK(nchw.dim() == 4 && nchw.is_contiguous(),
              "channels_last_copy: expected a contiguous [N, C, H, W] "
              "tensor, got ",
              shape_str(nchw.sizes()));
  const int64_t c = nchw.size(1), h = nchw.size(2), w = nchw.size(3);
  Tensor out = empty_strided(nchw.sizes(), {h * w * c, 1, w * c, c}, nchw.options());
  switch (nchw.element_size()) {
    case 1:
      transpose_planes<uint8_t>(nchw, out);
      break;
    case 2:
      transpose_planes<uint16_t>(nchw, out);
      break;
    case 4:
      transpose_planes<uint32_t>(nchw, out);
      break;
    default:
      transpose_planes<uint64_t>(nchw, out);
      break;
  }
  return out;
}

namespace {

// An encoded example's output spec: its transform's, or the whole decoded image's.
TensorSpec encoded_spec(const EncodedImage& image, const Transform* transform) {
  return transform ? transform->output_spec(image) : decoded_spec(image);
}

// Decodes and transforms an encoded example into its slot. A fault in a file whose dataset skips
// bad files (EncodedImage::bad_log) is recorded, and the next index's image is used instead, with
// the same random stream, so batches keep their size and stay reproducible.
void fill_encoded(const Dataset& dataset, Example& example, int64_t index, const Transform* transform,
                  const TensorSpec& expected, uint64_t seed, int64_t epoch, uint8_t* slot, int64_t first_index) {
  for (int64_t k = 1;; ++k) {
    const EncodedImage& image = *example.encoded;
    try {
      const TensorSpec spec = encoded_spec(image, transform);
      EMBER_CHECK(spec == expected, "DataLoader: example ", index, " (", image.name, ") becomes ",
                  shape_str(spec.shape), " ", dtype_name(spec.dtype), ", but the batch's first example (", first_index,
                  ") becomes ", shape_str(expected.shape), " ", dtype_name(expected.dtype),
                  "; a batch needs examples of one shape (crop or resize images to one size)");
      ExampleRandom random(seed, epoch, index);
      if (transform) {
        transform->apply(image, slot, random);
      } else {
        decode_planar(image, slot);
      }
      return;
    } catch (const Error& e) {
      if (!image.bad_log || k >= dataset.size()) throw;
      image.bad_log->record(image.name, e.what());
    }
    example = dataset.get((index + k) % dataset.size());
    EMBER_CHECK(example.encoded != nullptr, "DataLoader: example ", (index + k) % dataset.size(),
                " replaces a bad image but is not an encoded image");
  }
}

}  // namespace

Batch assemble_batch(const Dataset& dataset, std::vector<int64_t> indices, const Transform* transform, uint64_t seed,
                     int64_t epoch) {
  EMBER_CHECK(!indices.empty(), "assemble_batch: a batch needs at least one index");
  const int64_t count = static_cast<int64_t>(indices.size());
  Example first = dataset.get(indices[0]);
  const bool encoded = first.encoded != nullptr;
  EMBER_CHECK(encoded || first.data.defined(), "DataLoader: example ", indices[0], " has undefined data");
  const TensorSpec in_spec = encoded ? TensorSpec() : spec_of(first.data);
  const TensorSpec out_spec = encoded     ? encoded_spec(*first.encoded, transform)
                              : transform ? transform->output_spec(in_spec)
                                          : in_spec;
  const bool has_target = first.target.defined();
  const TensorSpec target_spec = has_target ? spec_of(first.target) : TensorSpec();

  Batch batch;
  batch.data = empty(batched(count, out_spec.shape), TensorOptions(out_spec.dtype));
  if (has_target) batch.target = empty(batched(count, target_spec.shape), TensorOptions(target_spec.dtype));
  uint8_t* data_slots = static_cast<uint8_t*>(batch.data.data_ptr());
  uint8_t* target_slots = has_target ? static_cast<uint8_t*>(batch.target.data_ptr()) : nullptr;
  const size_t data_bytes = out_spec.nbytes(), target_bytes = target_spec.nbytes();

  for (int64_t j = 0; j < count; ++j) {
    const int64_t index = indices[static_cast<size_t>(j)];
    Example example = j == 0 ? std::move(first) : dataset.get(index);
    uint8_t* slot = data_slots + static_cast<size_t>(j) * data_bytes;
    if (encoded) {
      EMBER_CHECK(example.encoded != nullptr, "DataLoader: example ", index,
                  " has no encoded image, but the batch's first (", indices[0], ") has one");
      fill_encoded(dataset, example, index, transform, out_spec, seed, epoch, slot, indices[0]);
    } else {
      Tensor data = checked_example_tensor(example.data, in_spec, "data", index, indices[0]);
      if (transform) {
        ExampleRandom random(seed, epoch, index);
        transform->apply(data.data_ptr(), in_spec, slot, random);
      } else {
        std::memcpy(slot, data.data_ptr(), data_bytes);
      }
    }
    if (has_target) {
      Tensor target = checked_example_tensor(example.target, target_spec, "target", index, indices[0]);
      std::memcpy(target_slots + static_cast<size_t>(j) * target_bytes, target.data_ptr(), target_bytes);
    } else {
      EMBER_CHECK(!example.target.defined(), "DataLoader: example ", index, " has a target but the batch's first (",
                  indices[0], ") has none");
    }
  }
  batch.indices = std::move(indices);
  return batch;
}

}  // namespace ember::data
