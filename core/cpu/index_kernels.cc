// CPU gather and scatter_add along one dim (PyTorch semantics). The index tensor's shape drives
// the loop; out/input/src may have any strides. scatter_add runs serially over the index
// because two index entries may name the same destination.
#include "core/cpu/kernels.h"
#include "core/cpu/thread_pool.h"

namespace ember::cpu {

namespace {

// Visits every element of `shape` with the element offsets of up to three strided operands.
template <typename Visit>
void for_each_index(const Shape& shape, const Shape* strides[3], Visit visit) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  const int64_t total = shape_numel(shape);
  std::vector<int64_t> index(nd, 0);
  int64_t off[3] = {0, 0, 0};
  for (int64_t e = 0; e < total; ++e) {
    visit(index, off);
    for (int64_t d = nd - 1; d >= 0; --d) {
      ++index[d];
      for (int k = 0; k < 3; ++k) off[k] += (*strides[k])[d];
      if (index[d] < shape[d]) break;
      for (int k = 0; k < 3; ++k) off[k] -= shape[d] * (*strides[k])[d];
      index[d] = 0;
    }
  }
}

template <typename T>
void gather_typed(const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index) {
  T* o = out.data_ptr<T>();
  const T* in = input.data_ptr<T>();
  const int64_t* idx = index.data_ptr<int64_t>();
  const int64_t limit = input.size(dim);
  // The input is addressed with its own strides, except along `dim`, where the index decides.
  Shape in_strides = input.strides();
  in_strides[dim] = 0;
  const Shape* strides[3] = {&out.strides(), &in_strides, &index.strides()};
  for_each_index(index.sizes(), strides, [&](const std::vector<int64_t>&, const int64_t* off) {
    int64_t j = idx[off[2]];
    EMBER_CHECK(j >= 0 && j < limit, "gather: index ", j, " is out of bounds for dimension ", dim, " with size ",
                limit);
    o[off[0]] = in[off[1] + j * input.stride(dim)];
  });
}

template <typename T>
void scatter_add_typed(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  T* o = out.data_ptr<T>();
  const T* s = src.data_ptr<T>();
  const int64_t* idx = index.data_ptr<int64_t>();
  const int64_t limit = out.size(dim);
  Shape out_strides = out.strides();
  out_strides[dim] = 0;
  const Shape* strides[3] = {&out_strides, &src.strides(), &index.strides()};
  for_each_index(index.sizes(), strides, [&](const std::vector<int64_t>&, const int64_t* off) {
    int64_t j = idx[off[2]];
    EMBER_CHECK(j >= 0 && j < limit, "scatter_add: index ", j, " is out of bounds for dimension ", dim, " with size ",
                limit);
    T& dst = o[off[0] + j * out.stride(dim)];
    dst = static_cast<T>(static_cast<ComputeType<T>>(dst) + static_cast<ComputeType<T>>(s[off[1]]));
  });
}

}  // namespace

void gather_kernel(const Tensor& out, const Tensor& input, int64_t dim, const Tensor& index) {
  EMBER_DISPATCH_ALL(input.dtype(), "gather", [&] { gather_typed<scalar_t>(out, input, dim, index); });
}

void scatter_add_kernel(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  EMBER_DISPATCH_NUMERIC(out.dtype(), "scatter_add", [&] { scatter_add_typed<scalar_t>(out, dim, index, src); });
}

}  // namespace ember::cpu
