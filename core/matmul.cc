// matmul / mm / bmm. Everything funnels into bmm, the one GEMM primitive autograd differentiates;
// broadcasting and 1-D promotion are views around it.
#include "core/autocast.h"
#include "core/autograd_hooks.h"
#include "core/backend.h"
#include "core/device_check.h"
#include "core/factory.h"
#include "core/ops.h"

namespace ember {

namespace {

// How a [rows, cols] matrix slice can be handed to GEMM without copying.
struct MatrixLayout {
  bool transposed = false;
  int64_t ld = 0;
};

bool gemm_layout(const Tensor& t, MatrixLayout* layout) {
  int64_t rows = t.size(1), cols = t.size(2);
  int64_t s_row = t.stride(1), s_col = t.stride(2);
  if ((s_col == 1 || cols == 1) && s_row >= std::max<int64_t>(1, cols)) {
    *layout = {false, s_row};
    return true;
  }
  if ((s_row == 1 || rows == 1) && s_col >= std::max<int64_t>(1, rows)) {
    *layout = {true, s_col};
    return true;
  }
  return false;
}

// What every product checks first, in the name of the op the user called.
void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  common_device(op, {a, b});
  EMBER_CHECK(a.dtype() == b.dtype(), op, ": expected both operands to have the same dtype, but got ",
              dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  EMBER_CHECK(is_floating(a.dtype()), op, ": expected a floating point dtype, got ", dtype_name(a.dtype()));
}

}  // namespace

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  if (autocast::Scope cast{autocast::Op::bmm, {&a_in, &b_in}}) return bmm(cast[0], cast[1]);
  check_operands("bmm", a_in, b_in);
  if (needs_grad({&a_in, &b_in})) return autograd_hooks()->bmm(a_in, b_in);
  EMBER_CHECK(a_in.dim() == 3, "bmm: batch1 must be a 3D tensor, got shape ", shape_str(a_in.sizes()));
  EMBER_CHECK(b_in.dim() == 3, "bmm: batch2 must be a 3D tensor, got shape ", shape_str(b_in.sizes()));
  EMBER_CHECK(a_in.size(0) == b_in.size(0), "bmm: batch sizes differ: ", shape_str(a_in.sizes()), " and ",
              shape_str(b_in.sizes()));
  EMBER_CHECK(a_in.size(2) == b_in.size(1), "bmm: shapes cannot be multiplied (", a_in.size(1), "x", a_in.size(2),
              " and ", b_in.size(1), "x", b_in.size(2), ")");
  const int64_t batch = a_in.size(0), m = a_in.size(1), k = a_in.size(2), n = b_in.size(2);
  Tensor out = empty({batch, m, n}, a_in.options());
  if (out.numel() == 0) return out;
  if (k == 0) return out.zero_();
  Tensor a = a_in, b = b_in;
  MatrixLayout la, lb;
  if (!gemm_layout(a, &la)) {
    a = a.contiguous();
    gemm_layout(a, &la);
  }
  if (!gemm_layout(b, &lb)) {
    b = b.contiguous();
    gemm_layout(b, &lb);
  }
  GemmArgs args;
  args.device = out.device();
  args.dtype = a.dtype();
  args.trans_a = la.transposed;
  args.trans_b = lb.transposed;
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = a.data_ptr();
  args.lda = la.ld;
  args.b = b.data_ptr();
  args.ldb = lb.ld;
  args.c = out.data_ptr();
  args.ldc = n;
  args.batch = batch;
  args.stride_a = batch > 1 ? a.stride(0) : 0;
  args.stride_b = batch > 1 ? b.stride(0) : 0;
  args.stride_c = m * n;
  kernels_for(out.device(), "bmm").gemm(args);
  return out;
}

Tensor mm(const Tensor& a, const Tensor& b) {
  if (autocast::Scope cast{autocast::Op::mm, {&a, &b}}) return mm(cast[0], cast[1]);
  check_operands("mm", a, b);
  EMBER_CHECK(a.dim() == 2, "mm: self must be a matrix, got shape ", shape_str(a.sizes()));
  EMBER_CHECK(b.dim() == 2, "mm: mat2 must be a matrix, got shape ", shape_str(b.sizes()));
  EMBER_CHECK(a.size(1) == b.size(0), "mm: mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
              " and ", b.size(0), "x", b.size(1), ")");
  return bmm(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (autocast::Scope cast{autocast::Op::matmul, {&a, &b}}) return matmul(cast[0], cast[1]);
  // Checked here so that errors name matmul and the caller's shapes, not the mm/bmm it becomes.
  check_operands("matmul", a, b);
  const int64_t da = a.dim(), db = b.dim();
  EMBER_CHECK(da > 0 && db > 0, "matmul: both arguments need to be at least 1D, but they are ", da, "D and ", db, "D");
  const int64_t k_a = a.size(-1), k_b = db == 1 ? b.size(0) : b.size(-2);
  EMBER_CHECK(k_a == k_b, "matmul: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
              " cannot be multiplied (", k_a, " != ", k_b, ")");
  if (da == 1 && db == 1) return mm(a.unsqueeze(0), b.unsqueeze(1)).view({});
  if (da == 2 && db == 2) return mm(a, b);
  if (da == 1 && db == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (da == 2 && db == 1) return mm(a, b.unsqueeze(1)).squeeze(1);
  // N-D: a [..., M, K] (1-D a is [1, K]), b [..., K, N] (1-D b is [K, 1]).
  Tensor a2 = da == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = db == 1 ? b.unsqueeze(1) : b;
  const int64_t m = a2.size(-2), k = a2.size(-1), n = b2.size(-1);
  Shape batch_a(a2.sizes().begin(), a2.sizes().end() - 2), batch_b(b2.sizes().begin(), b2.sizes().end() - 2);
  Tensor result;
  if (db <= 2) {
    // b is one matrix: fold a's batch dims into M and do a single GEMM. The row count is spelled
    // out because reshape cannot infer -1 next to a zero K.
    Shape out_shape = batch_a;
    out_shape.push_back(m);
    out_shape.push_back(n);
    result = mm(a2.reshape({shape_numel(batch_a) * m, k}), b2).view(out_shape);
  } else {
    Shape batch = broadcast_shapes(batch_a, batch_b, "matmul (batch dims)");
    int64_t count = shape_numel(batch);
    Shape ea = batch, eb = batch;
    ea.insert(ea.end(), {m, k});
    eb.insert(eb.end(), {k, n});
    Tensor a3 = a2.expand(ea).reshape({count, m, k});
    Tensor b3 = b2.expand(eb).reshape({count, k, n});
    Shape out_shape = batch;
    out_shape.insert(out_shape.end(), {m, n});
    result = bmm(a3, b3).view(out_shape);
  }
  if (da == 1) result = result.squeeze(-2);
  if (db == 1) result = result.squeeze(-1);
  return result;
}

Tensor Tensor::matmul(const Tensor& other) const { return ember::matmul(*this, other); }

}  // namespace ember
