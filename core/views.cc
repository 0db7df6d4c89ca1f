// View ops: new geometry over the same storage. Each builds a ViewSpec; make_view applies it,
// through the autograd hooks when the input requires grad.
#include <algorithm>
#include <optional>

#include "core/autograd_hooks.h"
#include "core/ops.h"
#include "core/views.h"

namespace ember {

namespace {

// Strides that let `new_sizes` view memory laid out as (sizes, strides), or nullopt
// (PyTorch's computeStride: walk contiguous chunks of the old layout).
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes) {
  Shape new_strides(new_sizes.size(), 1);
  if (sizes.empty()) return new_strides;  // a 0-dim tensor can only become all-ones shapes
  int64_t numel = shape_numel(sizes);
  if (numel == 0) {
    if (sizes == new_sizes) return strides;
    return contiguous_strides(new_sizes);
  }
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

Tensor make_view_impl(const Tensor& x, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>(x.storage(), std::move(sizes), std::move(strides), offset, x.dtype());
  impl->is_view = true;
  return Tensor(std::move(impl));
}

}  // namespace

Shape infer_size(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      EMBER_CHECK(infer_at < 0, op, ": only one dimension can be inferred (-1), got shape ", shape_str(shape));
      infer_at = static_cast<int64_t>(i);
    } else {
      EMBER_CHECK(out[i] >= 0, op, ": invalid shape dimension ", out[i], " in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    EMBER_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(shape), " is invalid for input of size ",
                numel);
    out[infer_at] = numel / known;
  } else {
    EMBER_CHECK(known == numel, op, ": shape ", shape_str(shape), " is invalid for input of size ", numel);
  }
  return out;
}

Tensor apply_view(const Tensor& x, const ViewSpec& spec) {
  using Kind = ViewSpec::Kind;
  switch (spec.kind) {
    case Kind::Reshape: {
      auto strides = view_strides(x.sizes(), x.strides(), spec.shape);
      EMBER_CHECK(strides.has_value(), "view: view size ", shape_str(spec.shape),
                  " is not compatible with input tensor's size ", shape_str(x.sizes()), " and stride ",
                  shape_str(x.strides()),
                  " (at least one dimension spans across two contiguous subspaces); "
                  "use reshape() instead");
      return make_view_impl(x, spec.shape, *strides, x.storage_offset());
    }
    case Kind::Permute: {
      Shape sizes(spec.dims.size()), strides(spec.dims.size());
      for (size_t i = 0; i < spec.dims.size(); ++i) {
        sizes[i] = x.sizes()[spec.dims[i]];
        strides[i] = x.strides()[spec.dims[i]];
      }
      return make_view_impl(x, sizes, strides, x.storage_offset());
    }
    case Kind::Expand: {
      const Shape& target = spec.shape;
      const int64_t lead = static_cast<int64_t>(target.size()) - x.dim();
      Shape strides(target.size(), 0);
      for (int64_t i = 0; i < x.dim(); ++i) {
        int64_t have = x.sizes()[i], want = target[i + lead];
        strides[i + lead] = have == want ? x.strides()[i] : 0;
      }
      return make_view_impl(x, target, strides, x.storage_offset());
    }
    case Kind::Slice: {
      Shape sizes = x.sizes(), strides = x.strides();
      int64_t length = spec.end > spec.start ? (spec.end - spec.start + spec.step - 1) / spec.step : 0;
      sizes[spec.dim] = length;
      strides[spec.dim] = x.strides()[spec.dim] * spec.step;
      return make_view_impl(x, sizes, strides, x.storage_offset() + spec.start * x.strides()[spec.dim]);
    }
    case Kind::Select: {
      Shape sizes = x.sizes(), strides = x.strides();
      int64_t offset = x.storage_offset() + spec.index * strides[spec.dim];
      sizes.erase(sizes.begin() + spec.dim);
      strides.erase(strides.begin() + spec.dim);
      return make_view_impl(x, sizes, strides, offset);
    }
  }
  EMBER_FAIL("view: unknown view kind");
}

Tensor make_view(const Tensor& x, const ViewSpec& spec) {
  if (needs_grad({&x})) return autograd_hooks()->view(x, spec);
  return apply_view(x, spec);
}

bool can_view(const Tensor& x, const Shape& shape) { return view_strides(x.sizes(), x.strides(), shape).has_value(); }

Tensor Tensor::view(const Shape& shape) const {
  ViewSpec spec;
  spec.shape = infer_size(shape, numel(), "view");
  return make_view(*this, spec);
}

Tensor Tensor::reshape(const Shape& shape) const {
  Shape resolved = infer_size(shape, numel(), "reshape");
  if (can_view(*this, resolved)) {
    ViewSpec spec;
    spec.shape = resolved;
    return make_view(*this, spec);
  }
  return ember::clone(*this, true).view(resolved);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  EMBER_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: number of dims don't match: expected ", dim(),
              ", got ", dims.size());
  ViewSpec spec;
  spec.kind = ViewSpec::Kind::Permute;
  std::vector<bool> seen(dims.size(), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, dim(), "permute");
    EMBER_CHECK(!seen[w], "permute: repeated dim ", d, " in ", shape_str(dims));
    seen[w] = true;
    spec.dims.push_back(w);
  }
  return make_view(*this, spec);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  int64_t n = dim();
  if (n == 0) return *this;
  int64_t a = wrap_dim(dim0, n, "transpose"), b = wrap_dim(dim1, n, "transpose");
  std::vector<int64_t> dims(n);
  for (int64_t i = 0; i < n; ++i) dims[i] = i;
  std::swap(dims[a], dims[b]);
  return permute(dims);
}

Tensor Tensor::t() const {
  EMBER_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dimensions, but got ", dim(), "-D tensor of shape ",
              shape_str(sizes()));
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::slice(int64_t dim_in, int64_t start, int64_t end, int64_t step) const {
  EMBER_CHECK(dim() > 0, "slice: cannot be applied to a 0-dim tensor");
  int64_t d = wrap_dim(dim_in, dim(), "slice");
  EMBER_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t n = size(d);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  ViewSpec spec;
  spec.kind = ViewSpec::Kind::Slice;
  spec.dim = d;
  spec.start = start;
  spec.end = end;
  spec.step = step;
  return make_view(*this, spec);
}

Tensor Tensor::narrow(int64_t dim_in, int64_t start, int64_t length) const {
  EMBER_CHECK(dim() > 0, "narrow: cannot be applied to a 0-dim tensor");
  int64_t d = wrap_dim(dim_in, dim(), "narrow");
  int64_t n = size(d);
  if (start < 0) start += n;
  EMBER_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: start (", start, ") + length (", length,
              ") exceeds dimension size (", n, ") of dim ", d);
  return slice(d, start, start + length, 1);
}

Tensor Tensor::select(int64_t dim_in, int64_t index) const {
  EMBER_CHECK(dim() > 0, "select: cannot be applied to a 0-dim tensor");
  int64_t d = wrap_dim(dim_in, dim(), "select");
  int64_t n = size(d);
  EMBER_CHECK(index >= -n && index < n, "select: index ", index, " out of range for tensor of size ",
              shape_str(sizes()), " at dimension ", d);
  ViewSpec spec;
  spec.kind = ViewSpec::Kind::Select;
  spec.dim = d;
  spec.index = index < 0 ? index + n : index;
  return make_view(*this, spec);
}

Tensor Tensor::expand(const Shape& shape) const {
  EMBER_CHECK(static_cast<int64_t>(shape.size()) >= dim(), "expand: the number of sizes provided (", shape.size(),
              ") must be greater or equal to the number of dimensions in the tensor (", dim(), ")");
  Shape target = shape;
  const int64_t lead = static_cast<int64_t>(shape.size()) - dim();
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < lead) {
      EMBER_CHECK(shape[i] >= 0, "expand: the expanded size ", shape[i],
                  " is not allowed in a leading, "
                  "non-existing dimension ",
                  i);
      continue;
    }
    int64_t have = size(i - lead);
    if (shape[i] == -1) target[i] = have;
    EMBER_CHECK(have == target[i] || have == 1, "expand: the expanded size of the tensor (", target[i],
                ") must match the existing size (", have, ") at non-singleton dimension ", i,
                ".  Target sizes: ", shape_str(shape), ".  Tensor sizes: ", shape_str(sizes()));
  }
  if (target == sizes()) return *this;
  ViewSpec spec;
  spec.kind = ViewSpec::Kind::Expand;
  spec.shape = target;
  return make_view(*this, spec);
}

namespace {
Tensor reshape_view(const Tensor& x, Shape shape) {
  ViewSpec spec;
  spec.shape = std::move(shape);
  return make_view(x, spec);
}
}  // namespace

Tensor Tensor::squeeze() const {
  Shape shape;
  for (int64_t s : sizes())
    if (s != 1) shape.push_back(s);
  return reshape_view(*this, shape);
}

Tensor Tensor::squeeze(int64_t dim_in) const {
  if (dim() == 0) return *this;
  int64_t d = wrap_dim(dim_in, dim(), "squeeze");
  if (size(d) != 1) return *this;
  Shape shape = sizes();
  shape.erase(shape.begin() + d);
  return reshape_view(*this, shape);
}

Tensor Tensor::unsqueeze(int64_t dim_in) const {
  int64_t d = wrap_dim(dim_in, dim() + 1, "unsqueeze");
  Shape shape = sizes();
  shape.insert(shape.begin() + d, 1);
  return reshape_view(*this, shape);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  EMBER_CHECK(s <= e, "flatten: start_dim (", s, ") cannot come after end_dim (", e, ")");
  Shape shape(sizes().begin(), sizes().begin() + s);
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged *= size(d);
  shape.push_back(merged);
  shape.insert(shape.end(), sizes().begin() + e + 1, sizes().end());
  return reshape(shape);
}

Tensor Tensor::unflatten(int64_t dim_in, const Shape& parts) const {
  int64_t d = wrap_dim(dim_in, dim(), "unflatten");
  Shape resolved = infer_size(parts, size(d), "unflatten");
  Shape shape(sizes().begin(), sizes().begin() + d);
  shape.insert(shape.end(), resolved.begin(), resolved.end());
  shape.insert(shape.end(), sizes().begin() + d + 1, sizes().end());
  return view(shape);
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : ember::clone(*this, true); }

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim_in) const {
  int64_t d = wrap_dim(dim_in, dim(), "split");
  EMBER_CHECK(split_size > 0 || (split_size == 0 && size(d) == 0), "split: split_size must be positive, got ",
              split_size);
  std::vector<Tensor> parts;
  int64_t n = size(d);
  if (n == 0) return {*this};
  for (int64_t start = 0; start < n; start += split_size)
    parts.push_back(narrow(d, start, std::min(split_size, n - start)));
  return parts;
}

std::vector<Tensor> Tensor::split_with_sizes(const std::vector<int64_t>& part_sizes, int64_t dim_in) const {
  int64_t d = wrap_dim(dim_in, dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : part_sizes) {
    EMBER_CHECK(s >= 0, "split_with_sizes: sizes must be non-negative, got ", shape_str(part_sizes));
    total += s;
  }
  EMBER_CHECK(total == size(d), "split_with_sizes: sizes ", shape_str(part_sizes), " must sum to the size of dim ", d,
              " (", size(d), "), got ", total);
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t s : part_sizes) {
    parts.push_back(narrow(d, start, s));
    start += s;
  }
  return parts;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim_in) const {
  EMBER_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  int64_t d = wrap_dim(dim_in, dim(), "chunk");
  int64_t split_size = (size(d) + chunks - 1) / chunks;
  if (split_size == 0) split_size = 1;
  return split(split_size, d);
}

std::vector<Tensor> Tensor::unbind(int64_t dim_in) const {
  int64_t d = wrap_dim(dim_in, dim(), "unbind");
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < size(d); ++i) parts.push_back(select(d, i));
  return parts;
}

}  // namespace ember
