// Building StridedLoop / ReduceLoop: reorder, drop unit dims, coalesce.
#include "core/loop.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/device_check.h"

namespace ember {

namespace {

// Coalesces dims (innermost first) in place: d and d+1 merge when, for every operand,
// stride[d+1] == stride[d] * size[d].
int coalesce(int ndim, int64_t* sizes, int noperands, int64_t (*strides)[kMaxLoopDims]) {
  if (ndim == 0) return 0;
  int out = 0;
  for (int d = 1; d < ndim; ++d) {
    bool mergeable = true;
    for (int k = 0; k < noperands; ++k) {
      if (strides[k][d] != strides[k][out] * sizes[out]) {
        mergeable = false;
        break;
      }
    }
    if (mergeable) {
      sizes[out] *= sizes[d];
    } else {
      ++out;
      sizes[out] = sizes[d];
      for (int k = 0; k < noperands; ++k) strides[k][out] = strides[k][d];
    }
  }
  return out + 1;
}

}  // namespace

StridedLoop make_loop(std::initializer_list<const Tensor*> operands, const char* op) {
  StridedLoop loop;
  loop.noperands = static_cast<int>(operands.size());
  EMBER_CHECK(loop.noperands <= kMaxLoopOperands, op, ": too many operands");
  const Tensor& out = **operands.begin();
  loop.device = out.device();
  const int64_t ndim = out.dim();
  EMBER_CHECK(ndim <= kMaxLoopDims, op, ": tensors may have at most ", kMaxLoopDims, " dims, got ", ndim);
  int k = 0;
  for (const Tensor* t : operands) {
    EMBER_CHECK(t->sizes() == out.sizes(), op, ": internal shape mismatch ", shape_str(t->sizes()), " vs ",
                shape_str(out.sizes()));
    if (t->device() != loop.device) {
      bool host_scalar = t->device().is_cpu();
      for (int64_t d = 0; d < t->dim(); ++d) host_scalar = host_scalar && (t->size(d) == 1 || t->stride(d) == 0);
      if (!host_scalar) device_mismatch(op, loop.device, t->device(), "argument " + std::to_string(k));
      loop.host_scalars |= 1u << k;
    }
    loop.data[k] = static_cast<char*>(t->data_ptr());
    loop.dtypes[k] = t->dtype();
    ++k;
  }
  loop.numel = out.numel();
  // Order dims by the output's stride, smallest first, so the output is walked in memory order.
  int order[kMaxLoopDims];
  int n = 0;
  for (int64_t d = ndim - 1; d >= 0; --d)
    if (out.size(d) != 1) order[n++] = static_cast<int>(d);
  std::stable_sort(order, order + n, [&](int a, int b) { return out.stride(a) < out.stride(b); });
  for (int i = 0; i < n; ++i) {
    loop.sizes[i] = out.size(order[i]);
    k = 0;
    for (const Tensor* t : operands) {
      loop.strides[k][i] = t->stride(order[i]) * static_cast<int64_t>(t->element_size());
      ++k;
    }
  }
  loop.ndim = coalesce(n, loop.sizes, loop.noperands, loop.strides);
  if (loop.ndim == 0) {  // a single element: one dim of size 1
    loop.ndim = 1;
    loop.sizes[0] = loop.numel == 0 ? 0 : 1;
  }
  return loop;
}

ReduceLoop make_reduce_loop(const Tensor& out, const Tensor* out2, const Tensor& in, const std::vector<bool>& reduced,
                            const char* op) {
  ReduceLoop loop;
  loop.device = in.device();
  EMBER_CHECK(out.device() == in.device() && (!out2 || out2->device() == in.device()), op, ": expected the output on ",
              in.device().str(), ", got ", out.device().str());
  const int64_t ndim = in.dim();
  EMBER_CHECK(ndim <= kMaxLoopDims, op, ": tensors may have at most ", kMaxLoopDims, " dims, got ", ndim);
  loop.out = static_cast<char*>(out.data_ptr());
  loop.out2 = out2 ? static_cast<char*>(out2->data_ptr()) : nullptr;
  loop.in = static_cast<const char*>(in.data_ptr());
  loop.out_dtype = out.dtype();
  loop.in_dtype = in.dtype();
  const int64_t in_es = static_cast<int64_t>(in.element_size());
  const int64_t out_es = static_cast<int64_t>(out.element_size());

  // Kept dims: ordered by the input's stride (smallest first) and coalesced over (out, out2, in).
  int kept[kMaxLoopDims], red[kMaxLoopDims];
  int nk = 0, nr = 0;
  for (int64_t d = ndim - 1; d >= 0; --d) {
    if (in.size(d) == 1) continue;
    if (reduced[d])
      red[nr++] = static_cast<int>(d);
    else
      kept[nk++] = static_cast<int>(d);
  }
  auto by_in_stride = [&](int a, int b) { return in.stride(a) < in.stride(b); };
  std::stable_sort(kept, kept + nk, by_in_stride);
  std::stable_sort(red, red + nr, by_in_stride);

  int64_t kstrides[3][kMaxLoopDims];
  for (int i = 0; i < nk; ++i) {
    loop.kept_sizes[i] = in.size(kept[i]);
    kstrides[0][i] = out.stride(kept[i]) * out_es;
    kstrides[1][i] = out2 ? out2->stride(kept[i]) * 8 : 0;
    kstrides[2][i] = in.stride(kept[i]) * in_es;
  }
  loop.nkept = coalesce(nk, loop.kept_sizes, 3, kstrides);
  for (int i = 0; i < loop.nkept; ++i) {
    loop.kept_out_strides[i] = kstrides[0][i];
    loop.kept_out2_strides[i] = kstrides[1][i];
    loop.kept_in_strides[i] = kstrides[2][i];
  }
  int64_t rstrides[1][kMaxLoopDims];
  for (int i = 0; i < nr; ++i) {
    loop.reduced_sizes[i] = in.size(red[i]);
    rstrides[0][i] = in.stride(red[i]) * in_es;
  }
  loop.nreduced = coalesce(nr, loop.reduced_sizes, 1, rstrides);
  for (int i = 0; i < loop.nreduced; ++i) loop.reduced_in_strides[i] = rstrides[0][i];
  loop.kept_numel = out.numel();
  loop.reduced_numel = 1;
  for (int64_t d = 0; d < ndim; ++d)
    if (reduced[d]) loop.reduced_numel *= in.size(d);
  return loop;
}

}  // namespace ember
