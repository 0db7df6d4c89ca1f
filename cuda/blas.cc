// cuBLAS from row-major arguments: a row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T, so cuBLAS receives B before A with the same transpose flags and m, n
// swapped. One handle per device and host thread (a handle's stream is per-handle state, and
// threads queue work on their own current streams), bound to the current stream at each call.
#include "cuda/blas.h"

#include <atomic>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/api.h"
#include "cuda/check.h"
#include "cuda/kernels/gemm.cuh"

#if defined(EMBER_CUDA)
#include <cublas_v2.h>
#endif

namespace ember::cuda {

namespace {

std::atomic<bool> allow_tf32{false};
std::atomic<int> kernel_choice{static_cast<int>(GemmKernel::Auto)};

#if defined(EMBER_CUDA)
void check_cublas(cublasStatus_t status, const char* call, const GemmArgs& g) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  EMBER_FAIL("matmul: ", call, " failed on cuda:", g.device.index, " with ", cublasGetStatusName(status), " (",
             cublasGetStatusString(status), ") for m=", g.m, " n=", g.n, " k=", g.k, " batch=", g.batch);
}

cublasHandle_t handle_for(const GemmArgs& g) {
  // Kept for the thread's life and never destroyed: creating one costs far more than a call, and
  // at exit the CUDA runtime may already be torn down (the device allocators are kept the same way).
  thread_local std::vector<cublasHandle_t> handles;
  const int device = g.device.index;
  if (handles.size() <= static_cast<size_t>(device)) handles.resize(device + 1, nullptr);
  cublasHandle_t& h = handles[device];
  if (!h) check_cublas(cublasCreate(&h), "cublasCreate", g);
  return h;
}

bool fits_int(int64_t v) { return v <= std::numeric_limits<int>::max(); }

// C's dtype is g.dtype, or float32 (c_float32) for 16-bit A and B.
void cublas_gemm(const GemmArgs& g, bool c_float32) {
  EMBER_CHECK(fits_int(g.m) && fits_int(g.n) && fits_int(g.k) && fits_int(g.lda) && fits_int(g.ldb) &&
                  fits_int(g.ldc) && fits_int(g.batch),
              "matmul: sizes beyond 2^31 - 1 (m=", g.m, " n=", g.n, " k=", g.k, " batch=", g.batch,
              ") exceed cuBLAS's int arguments");
  DeviceGuard guard(g.device.index);
  cublasHandle_t h = handle_for(g);
  check_cublas(cublasSetStream(h, current_stream().handle()), "cublasSetStream", g);
  // 16-bit products run on tensor cores with float32 compute (CUBLAS_COMPUTE_32F below); without
  // this flag cuBLAS may still add split-K partial sums in the 16-bit output type (PyTorch's
  // allow_{fp16,bf16}_reduced_precision_reduction, on by default there). Ember's 16-bit products
  // accumulate in float32 end to end, as its own kernel does.
  const bool sixteen_bit = g.dtype == kBFloat16 || g.dtype == kFloat16;
  check_cublas(
      cublasSetMathMode(h, sixteen_bit ? static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                                   CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
                                       : CUBLAS_DEFAULT_MATH),
      "cublasSetMathMode", g);
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = allow_tf32.load() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float alpha32 = static_cast<float>(g.alpha), beta32 = static_cast<float>(g.beta);
  const void* alpha = &alpha32;
  const void* beta = &beta32;
  switch (g.dtype) {
    case kFloat32:
      break;
    case kFloat64:
      type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      alpha = &g.alpha;
      beta = &g.beta;
      break;
    case kBFloat16:
      type = CUDA_R_16BF;
      compute = CUBLAS_COMPUTE_32F;
      break;
    case kFloat16:
      type = CUDA_R_16F;
      compute = CUBLAS_COMPUTE_32F;
      break;
    default:
      detail::unsupported_dtype("matmul", g.dtype);
  }
  EMBER_CHECK(!c_float32 || sixteen_bit, "matmul: a float32 output is for bfloat16 and float16 operands, got ",
              dtype_name(g.dtype));
  const cudaDataType_t c_type = c_float32 ? CUDA_R_32F : type;
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas(
      cublasGemmStridedBatchedEx(h, op_b, op_a, static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k),
                                 alpha, g.b, type, static_cast<int>(g.ldb), g.stride_b, g.a, type,
                                 static_cast<int>(g.lda), g.stride_a, beta, g.c, c_type, static_cast<int>(g.ldc),
                                 g.stride_c, static_cast<int>(g.batch), compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx", g);
}
#endif

}  // namespace

void set_matmul_allow_tf32(bool allow) { allow_tf32.store(allow); }
bool matmul_allow_tf32() { return allow_tf32.load(); }
void set_gemm_kernel(GemmKernel kernel) { kernel_choice.store(static_cast<int>(kernel)); }
GemmKernel gemm_kernel_choice() { return static_cast<GemmKernel>(kernel_choice.load()); }

void gemm_kernel(const GemmArgs& args) {
  if (args.m == 0 || args.n == 0 || args.batch == 0) return;
#if defined(EMBER_CUDA)
  if (gemm_kernel_choice() == GemmKernel::Auto) return cublas_gemm(args, false);
#endif
  ember_gemm(args);
}

void gemm_float32_output(const GemmArgs& args) {
  if (args.m == 0 || args.n == 0 || args.batch == 0) return;
#if defined(EMBER_CUDA)
  if (gemm_kernel_choice() == GemmKernel::Auto) return cublas_gemm(args, true);
#endif
  ember_gemm_float32_output(args);
}

}  // namespace ember::cuda
