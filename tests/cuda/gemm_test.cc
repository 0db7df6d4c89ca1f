// The GEMM entry on cuda:0 against the CPU backend's, called directly so that what matmul never
// asks for is covered too: alpha and beta, every transpose, leading dimensions wider than the
// matrix, batch strides (including a shared operand, stride 0), sizes that leave partial 64 x 64
// tiles and 16-deep slices, and a C full of NaN that beta = 0 must not read.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "core/backend.h"
#include "core/ember_core.h"
#include "cuda/api.h"

using namespace ember;

namespace {

struct Case {
  bool trans_a, trans_b;
  int64_t m, n, k, batch;
  double alpha, beta;
  bool shared_b;  // every batch reads the same B
};

// A [rows, cols] matrix per batch stored with leading dimension cols + 3.
Tensor padded(int64_t batch, int64_t rows, int64_t cols, DType dtype) {
  return randn({batch, rows, cols + 3}, TensorOptions(kFloat64)).to(dtype);
}

GemmArgs args_for(const Case& c, DType dtype, const Tensor& a, const Tensor& b, const Tensor& out) {
  GemmArgs g;
  g.device = out.device();
  g.dtype = dtype;
  g.trans_a = c.trans_a;
  g.trans_b = c.trans_b;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.alpha = c.alpha;
  g.beta = c.beta;
  g.a = a.data_ptr();
  g.lda = a.size(2);  // the padded row length
  g.b = b.data_ptr();
  g.ldb = b.size(2);
  g.c = out.data_ptr();
  g.ldc = out.size(2);
  g.batch = c.batch;
  g.stride_a = a.stride(0);
  g.stride_b = c.shared_b ? 0 : b.stride(0);
  g.stride_c = out.stride(0);
  return g;
}

}  // namespace

TEST_CASE("GEMM on cuda:0 equals the CPU backend's for every transpose, alpha, beta and batch stride") {
  REQUIRE(cuda::device_count() >= 1);
  const std::vector<Case> cases = {
      {false, false, 70, 130, 33, 1, 1.0, 0.0, false}, {true, false, 65, 64, 17, 2, 2.0, 0.5, false},
      {false, true, 1, 129, 40, 3, -1.0, 1.0, true},   {true, true, 97, 5, 64, 2, 0.5, -2.0, false},
      {false, false, 64, 64, 16, 1, 1.0, 0.0, false},  {true, false, 3, 200, 1, 4, 1.0, 0.0, true},
      {false, false, 33, 47, 0, 2, 1.0, 0.5, false},  // k = 0: C = beta C
  };
  manual_seed(3);
  for (DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    for (const Case& c : cases) {
      INFO(dtype_name(dtype) << " trans_a=" << c.trans_a << " trans_b=" << c.trans_b << " m=" << c.m << " n=" << c.n
                             << " k=" << c.k << " batch=" << c.batch << " alpha=" << c.alpha << " beta=" << c.beta);
      Tensor a = c.trans_a ? padded(c.batch, c.k, c.m, dtype) : padded(c.batch, c.m, c.k, dtype);
      Tensor b = c.trans_b ? padded(c.batch, c.n, c.k, dtype) : padded(c.batch, c.k, c.n, dtype);
      Tensor out = padded(c.batch, c.m, c.n - 1, dtype);  // rows of n + 2
      if (c.beta == 0.0) out.slice(2, 0, c.n).fill_(NAN);
      Tensor expected = out.clone();
      kernels_for(Device(kCPU), "test").gemm(args_for(c, dtype, a, b, expected));
      Tensor a_dev = a.to(Device::cuda(0)), b_dev = b.to(Device::cuda(0)), out_dev = out.to(Device::cuda(0));
      kernels_for(Device::cuda(0), "test").gemm(args_for(c, dtype, a_dev, b_dev, out_dev));
      Tensor got = out_dev.cpu();
      // Only the m x n block is written; the padding keeps its old values.
      Tensor block = got.slice(2, 0, c.n).to(kFloat64), want = expected.slice(2, 0, c.n).to(kFloat64);
      REQUIRE((block != block).sum().item<int64_t>() == 0);  // no NaN read from C
      const double tol = dtype == kFloat64 ? 1e-12 : dtype == kFloat32 ? 1e-5 : 2e-2;
      const double scale = std::max(1.0, std::sqrt(static_cast<double>(c.k)) * std::abs(c.alpha) + std::abs(c.beta));
      CHECK((block - want).abs().amax().item<double>() <= tol * scale * 4);
      CHECK((got.slice(2, c.n, got.size(2)).to(kFloat64) - out.slice(2, c.n, out.size(2)).to(kFloat64))
                .abs()
                .sum()
                .item<double>() == 0.0);
    }
  }
}
