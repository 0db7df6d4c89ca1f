// The CPU backend's float32 GEMM (oneDNN's sgemm) against the float64 reference loop nest, on odd
// and skinny shapes, every transpose combination, padded leading dimensions, alpha/beta and K = 0;
// the bf16 GEMM the same way; plus matmul from transposed views, which must reach the GEMM as flags rather than copies; and
// Ember's own skinny GEMM (core/cpu/skinny_sgemm.h) directly, on the edges of its blocks, panels
// and passes, with and without streaming stores.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/backend.h"
#include "core/cpu/avx2_tile.h"
#include "core/cpu/gemm.h"
#include "core/cpu/skinny_sgemm.h"
#include "core/cpu/thread_pool.h"
#include "core/ember_core.h"

namespace {

struct Shape3 {
  int64_t m, n, k;
};

// Stored matrix of `rows` x `cols` (as laid out in memory) with leading dimension ld >= cols.
std::vector<float> random_matrix(int64_t rows, int64_t cols, int64_t ld, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> out(static_cast<size_t>(std::max<int64_t>(rows, 1) * ld));
  for (float& v : out) v = uniform(rng);
  return out;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The largest error of C past its tolerance (<= 0 when all agree): padding columns must be left
// alone, real ones agree with the float64 reference to float32 accumulation error.
double excess_error(const Shape3& s, const float* c, const std::vector<double>& expected, int64_t ldc) {
  double worst = 0;
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i * ldc + j);
      const double tolerance = j < s.n ? 1e-5 * (1.0 + static_cast<double>(s.k)) : 0.0;
      worst = std::max(worst, std::abs(c[at] - expected[at]) - tolerance);
    }
  return worst;
}

}  // namespace

TEST_CASE("sgemm matches the float64 reference", "[gemm]") {
  std::mt19937 rng(7);
  // The last row are long reductions into small outputs, which sgemm splits over K by thread; it
  // runs once on the default team and once on an odd one, so the split is uneven.
  const Shape3 shapes[] = {{1, 1, 1},
                           {3, 5, 7},
                           {16, 144, 300},
                           {33, 17, 1},
                           {64, 9, 576},
                           {144, 47, 16},
                           {1, 130, 33},
                           {70, 1, 65},
                           {5, 4, 0},
                           {129, 131, 127},
                           {16, 40, 2000},
                           {9, 3, 1001},
                           {2, 1, 999},
                           // Large enough for the skinny kernel, on CPUs where sgemm takes it.
                           {3, 32770, 64}};
  const int default_threads = ember::cpu::num_threads();
  for (int threads : {default_threads, 3}) {
    ember::cpu::set_num_threads(threads);
    for (const Shape3& s : shapes) {
      for (int trans = 0; trans < 4; ++trans) {
        const bool ta = trans & 1, tb = trans & 2;
        for (int pad : {0, 3}) {
          for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, 2.0f}}) {
            INFO("threads " << threads << " m=" << s.m << " n=" << s.n << " k=" << s.k << " trans_a=" << ta
                            << " trans_b=" << tb << " pad=" << pad << " alpha=" << alpha << " beta=" << beta);
            const int64_t a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k;
            const int64_t b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n;
            const int64_t lda = std::max<int64_t>(a_cols, 1) + pad, ldb = std::max<int64_t>(b_cols, 1) + pad;
            const int64_t ldc = std::max<int64_t>(s.n, 1) + pad;
            std::vector<float> a = random_matrix(a_rows, a_cols, lda, rng);
            std::vector<float> b = random_matrix(b_rows, b_cols, ldb, rng);
            std::vector<float> c = random_matrix(s.m, s.n, ldc, rng);
            std::vector<double> expected = widen(c);
            ember::cpu::gemm_reference<double>(ta, tb, s.m, s.n, s.k, alpha, widen(a).data(), lda, widen(b).data(), ldb,
                                               beta, expected.data(), ldc);
            ember::cpu::sgemm(ta, tb, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
            REQUIRE(excess_error(s, c.data(), expected, ldc) <= 0.0);
          }
        }
      }
    }
  }
  ember::cpu::set_num_threads(default_threads);
}

TEST_CASE("matmul of transposed views equals matmul of their contiguous copies", "[gemm]") {
  using namespace ember;
  manual_seed(3);
  Tensor a = randn({37, 19}), b = randn({23, 37});
  Tensor from_views = matmul(a.t(), b.t());  // [19, 37] x [37, 23]
  Tensor from_copies = matmul(a.t().contiguous(), b.t().contiguous());
  std::vector<double> x = from_views.to_vector<double>(), y = from_copies.to_vector<double>();
  REQUIRE(from_views.sizes() == Shape{19, 23});
  for (size_t i = 0; i < x.size(); ++i) REQUIRE(std::abs(x[i] - y[i]) <= 1e-5);
}

TEST_CASE("skinny sgemm kernel matches the float64 reference", "[gemm]") {
  // Every x86-64 CPU this project builds for has AVX2; one without it fails here rather than
  // passing without running the kernel.
  REQUIRE(ember::cpu::avx2::supported());
  using ember::cpu::skinny_sgemm_preferred;
  const bool avx2_only = ember::cpu::avx2::preferred_cpu();
  CHECK(skinny_sgemm_preferred(false, false, 16, 131072, 144, 1.0f, 0.0f) == avx2_only);
  CHECK(skinny_sgemm_preferred(true, false, 144, 131072, 16, 1.0f, 0.0f) == avx2_only);
  CHECK_FALSE(skinny_sgemm_preferred(false, true, 16, 131072, 144, 1.0f, 0.0f));
  CHECK_FALSE(skinny_sgemm_preferred(false, false, 16, 131072, 144, 0.5f, 0.0f));
  CHECK_FALSE(skinny_sgemm_preferred(false, false, 256, 256, 256, 1.0f, 0.0f));
  std::mt19937 rng(11);
  // n: one panel, a panel plus 5 columns past the vectors, several blocks with 16- and 8-lane
  // panels at the edge; k: one step, a pass, two uneven passes (161 = 80 + 81), three passes.
  const Shape3 shapes[] = {{1, 8, 1},     {5, 37, 16},   {16, 300, 161}, {17, 520, 7},
                           {70, 264, 33}, {3, 777, 333}, {144, 72, 16},  {2, 13, 0}};
  const int default_threads = ember::cpu::num_threads();
  for (int threads : {default_threads, 3}) {
    ember::cpu::set_num_threads(threads);
    for (const Shape3& s : shapes)
      for (bool ta : {false, true})
        for (int pad : {0, 8})
          for (bool accumulate : {false, true})
            for (bool streaming : {false, true}) {
              INFO("threads " << threads << " m=" << s.m << " n=" << s.n << " k=" << s.k << " trans_a=" << ta
                              << " pad=" << pad << " accumulate=" << accumulate << " streaming=" << streaming);
              const int64_t a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k;
              const int64_t lda = std::max<int64_t>(a_cols, 1) + pad, ldb = s.n + pad;
              // Streaming stores need 32-byte aligned rows of C: ldc a multiple of 8 and an aligned C.
              const int64_t ldc = (s.n + pad + 7) / 8 * 8;
              std::vector<float> a = random_matrix(a_rows, a_cols, lda, rng);
              std::vector<float> b = random_matrix(s.k, s.n, ldb, rng);
              std::vector<float> c_storage = random_matrix(s.m + 1, ldc, ldc, rng);  // a row spare for the alignment
              float* c = c_storage.data();
              while (reinterpret_cast<uintptr_t>(c) % 32 != 0) ++c;
              std::vector<double> expected(c, c + s.m * ldc);
              ember::cpu::gemm_reference<double>(ta, false, s.m, s.n, s.k, 1.0, widen(a).data(), lda, widen(b).data(),
                                                 ldb, accumulate ? 1.0 : 0.0, expected.data(), ldc);
              ember::cpu::skinny_sgemm(ta, s.m, s.n, s.k, a.data(), lda, b.data(), ldb, accumulate, c, ldc, streaming);
              REQUIRE(excess_error(s, c, expected, ldc) <= 0.0);
            }
  }
  ember::cpu::set_num_threads(default_threads);
}

// bf16 GEMMs (autocast's linear and matmul) through the kernel table: oneDNN's bf16 matmul where
// the CPU has native bf16, else widened to float32; either way products summed in float32 and C
// rounded to bf16 once. Every transpose, padded leading dimensions, alpha/beta and a batch.
TEST_CASE("bf16 gemm matches the float64 reference", "[gemm]") {
  using namespace ember;
  std::mt19937 rng(11);
  const Shape3 shapes[] = {{1, 1, 1}, {3, 5, 7}, {33, 17, 1}, {70, 1, 65}, {129, 10, 512}, {5, 4, 0}};
  for (const Shape3& s : shapes)
    for (int trans = 0; trans < 4; ++trans)
      for (int pad : {0, 3})
        for (auto [alpha, beta] : {std::pair{1.0, 0.0}, std::pair{0.5, 2.0}}) {
          const bool ta = trans & 1, tb = trans & 2;
          INFO("m=" << s.m << " n=" << s.n << " k=" << s.k << " trans_a=" << ta << " trans_b=" << tb << " pad=" << pad
                    << " alpha=" << alpha << " beta=" << beta);
          const int64_t a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k;
          const int64_t b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n;
          const int64_t lda = std::max<int64_t>(a_cols, 1) + pad, ldb = std::max<int64_t>(b_cols, 1) + pad;
          const int64_t ldc = std::max<int64_t>(s.n, 1) + pad;
          const int64_t batch = 2;
          const int64_t stride_a = std::max<int64_t>(a_rows, 1) * lda, stride_b = std::max<int64_t>(b_rows, 1) * ldb;
          const int64_t stride_c = std::max<int64_t>(s.m, 1) * ldc;
          auto bf16_matrix = [&](int64_t size) {
            std::vector<float> v = random_matrix(1, size, size, rng);
            return std::vector<BFloat16>(v.begin(), v.end());
          };
          const std::vector<BFloat16> a = bf16_matrix(batch * stride_a), b = bf16_matrix(batch * stride_b);
          std::vector<BFloat16> c = bf16_matrix(batch * stride_c);
          std::vector<double> expected(c.begin(), c.end());
          const std::vector<double> wa(a.begin(), a.end()), wb(b.begin(), b.end());
          for (int64_t i = 0; i < batch; ++i)
            cpu::gemm_reference<double>(ta, tb, s.m, s.n, s.k, alpha, wa.data() + i * stride_a, lda,
                                        wb.data() + i * stride_b, ldb, beta, expected.data() + i * stride_c, ldc);
          GemmArgs g;
          g.device = Device(kCPU);
          g.dtype = kBFloat16;
          g.trans_a = ta, g.trans_b = tb, g.m = s.m, g.n = s.n, g.k = s.k, g.alpha = alpha, g.beta = beta;
          g.a = a.data(), g.lda = lda, g.b = b.data(), g.ldb = ldb, g.c = c.data(), g.ldc = ldc;
          g.batch = batch, g.stride_a = stride_a, g.stride_b = stride_b, g.stride_c = stride_c;
          kernels_for(Device(kCPU), "gemm_test").gemm(g);
          double worst = 0;
          for (int64_t i = 0; i < batch * stride_c; ++i) {
            const bool padding = (i % stride_c) % ldc >= s.n;
            // bf16's rounding of C (2^-9 relative) and float32 sums of K products.
            const double tolerance = padding ? 0.0 : 4e-3 * std::abs(expected[i]) + 1e-5 * (1.0 + s.k);
            worst = std::max(worst, std::abs(static_cast<double>(c[i]) - expected[i]) - tolerance);
          }
          REQUIRE(worst <= 0.0);
        }
}
