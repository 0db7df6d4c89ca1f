// cat and stack: one output, each input copied into its slice; cat's output is channels-last when
// every input is in channels-last order, else contiguous.
#include <string>

#include "core/autograd_hooks.h"
#include "core/device_check.h"
#include "core/factory.h"
#include "core/ops.h"

namespace ember {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  for (const Tensor& t : tensors)
    if (needs_grad({&t})) return autograd_hooks()->cat(tensors, dim);
  // Legacy rule kept from PyTorch: 1-D empty tensors are skipped whatever the other shapes.
  std::vector<const Tensor*> parts;
  for (const Tensor& t : tensors)
    if (!(t.dim() == 1 && t.numel() == 0)) parts.push_back(&t);
  if (parts.empty()) return tensors[0].clone();
  const Tensor& first = *parts[0];
  EMBER_CHECK(first.dim() > 0, "cat: zero-dimensional tensor (at position 0) cannot be concatenated");
  int64_t d = wrap_dim(dim, first.dim(), "cat");
  DType dtype = first.dtype();
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& t = *parts[i];
    const int64_t number = parts[i] - tensors.data();  // in the caller's list, skipped tensors included
    if (t.device() != first.device())
      device_mismatch("cat", first.device(), t.device(), "tensor number " + std::to_string(number));
    EMBER_CHECK(t.dim() == first.dim(), "cat: tensors must have the same number of dimensions: got ", first.dim(),
                " and ", t.dim(), " (at position ", number, ")");
    for (int64_t k = 0; k < first.dim(); ++k) {
      EMBER_CHECK(k == d || t.size(k) == first.size(k), "cat: sizes of tensors must match except in dimension ", d,
                  ". Expected size ", first.size(k), " but got size ", t.size(k), " for tensor number ", number,
                  " in the list (shapes ", shape_str(first.sizes()), " and ", shape_str(t.sizes()), ")");
    }
    dtype = promote_types(dtype, t.dtype());
    total += t.size(d);
  }
  Shape shape = first.sizes();
  shape[d] = total;
  // Channels-last in, channels-last out (PyTorch's rule): a channels-last network's joins stay in
  // its layout, so the elementwise ops after them do not meet two layouts at once.
  bool channels_last = true;
  for (const Tensor* t : parts) channels_last = channels_last && channels_last_order(*t);
  const TensorOptions options = TensorOptions(dtype).device(first.device());
  Tensor out = channels_last ? empty_channels_last(shape, options) : empty(shape, options);
  int64_t offset = 0;
  for (const Tensor* t : parts) {
    copy_into(out.narrow(d, offset, t->size(d)), *t);
    offset += t->size(d);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 1; i < tensors.size(); ++i)
    if (tensors[i].device() != tensors[0].device())
      device_mismatch("stack", tensors[0].device(), tensors[i].device(), "tensor number " + std::to_string(i));
  int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i].sizes() == tensors[0].sizes(), "stack: expects each tensor to be equal size, but got ",
                shape_str(tensors[0].sizes()), " at entry 0 and ", shape_str(tensors[i].sizes()), " at entry ", i);
    expanded.push_back(tensors[i].unsqueeze(d));
  }
  return cat(expanded, d);
}

}  // namespace ember
