// CPU softmax / log-softmax along one dim, viewing the input as [outer, size, inner], and their
// backward from the forward output. The formulas are core/softmax_math.h's.
#include <cmath>
#include <limits>

#include "core/cpu/kernels.h"
#include "core/cpu/thread_pool.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/softmax_math.h"

namespace ember::cpu {

namespace {

struct Slices {
  int64_t outer = 1, size = 1, inner = 1;
};

Slices slices(const Tensor& t, int64_t dim) {
  Slices s;
  for (int64_t d = 0; d < dim; ++d) s.outer *= t.size(d);
  s.size = t.dim() == 0 ? 1 : t.size(dim);
  for (int64_t d = dim + 1; d < t.dim(); ++d) s.inner *= t.size(d);
  return s;
}

DType compute_dtype(DType d) { return d == kFloat64 ? kFloat64 : kFloat32; }

template <typename T>
void softmax_typed(const T* x, T* y, const Slices& s, bool log) {
  parallel_for(0, s.outer * s.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, s.size)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t r = lo; r < hi; ++r) {
                   const int64_t o = r / s.inner, i = r % s.inner;
                   const T* in = x + o * s.size * s.inner + i;
                   T* out = y + o * s.size * s.inner + i;
                   T max = -std::numeric_limits<T>::infinity();
                   for (int64_t k = 0; k < s.size; ++k) max = formula::softmax_max(max, in[k * s.inner]);
                   const T shift = formula::softmax_shift(max);
                   double total = 0;
                   for (int64_t k = 0; k < s.size; ++k) total += formula::softmax_term(in[k * s.inner], shift);
                   if (log) {
                     const T log_total = static_cast<T>(std::log(total));
                     for (int64_t k = 0; k < s.size; ++k)
                       out[k * s.inner] = formula::log_softmax_output(in[k * s.inner], shift, log_total);
                   } else {
                     const double inverse_total = 1.0 / total;
                     for (int64_t k = 0; k < s.size; ++k)
                       out[k * s.inner] = formula::softmax_output(in[k * s.inner], shift, inverse_total);
                   }
                 }
               });
}

template <typename T>
void softmax_backward_typed(const T* g, const T* y, T* dx, const Slices& s, bool log) {
  parallel_for(0, s.outer * s.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, s.size)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t r = lo; r < hi; ++r) {
                   const int64_t base = (r / s.inner) * s.size * s.inner + r % s.inner;
                   double sum = 0;
                   for (int64_t k = 0; k < s.size; ++k) {
                     int64_t j = base + k * s.inner;
                     sum += formula::softmax_backward_term(g[j], y[j], log);
                   }
                   for (int64_t k = 0; k < s.size; ++k) {
                     int64_t j = base + k * s.inner;
                     dx[j] = formula::softmax_backward_element(g[j], y[j], sum, log);
                   }
                 }
               });
}

}  // namespace

Tensor softmax_kernel(const Tensor& input, int64_t dim, bool log) {
  NoGradGuard no_grad;
  DType ct = compute_dtype(input.dtype());
  Tensor x = input.to(ct).contiguous();
  Tensor y = empty(x.sizes(), x.options());
  Slices s = slices(x, dim);
  if (x.numel() > 0) {
    if (ct == kFloat64)
      softmax_typed<double>(x.data_ptr<double>(), y.data_ptr<double>(), s, log);
    else
      softmax_typed<float>(x.data_ptr<float>(), y.data_ptr<float>(), s, log);
  }
  return y.to(input.dtype());
}

Tensor softmax_backward_kernel(const Tensor& grad_output, const Tensor& output, int64_t dim, bool log) {
  NoGradGuard no_grad;
  DType ct = compute_dtype(output.dtype());
  Tensor g = grad_output.to(ct).contiguous(), y = output.to(ct).contiguous();
  Tensor dx = empty(y.sizes(), y.options());
  Slices s = slices(y, dim);
  if (y.numel() > 0) {
    if (ct == kFloat64)
      softmax_backward_typed<double>(g.data_ptr<double>(), y.data_ptr<double>(), dx.data_ptr<double>(), s, log);
    else
      softmax_backward_typed<float>(g.data_ptr<float>(), y.data_ptr<float>(), dx.data_ptr<float>(), s, log);
  }
  return dx.to(grad_output.dtype());
}

}  // namespace ember::cpu
