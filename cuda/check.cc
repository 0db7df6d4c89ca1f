// Turning cudaError_t into ember::Error.
#include "cuda/check.h"

#include <string>

#include "core/error.h"

namespace ember::cuda {

void check(cudaError_t error, const char* op) {
  if (error == cudaSuccess) return;
  cudaGetLastError();  // clears a non-sticky error so the next call starts clean
  int device = -1;
  cudaGetDevice(&device);
  std::string detail;
#if !defined(EMBER_CUDA)
  detail = emu::failure_message();
  if (!detail.empty()) detail = ": " + detail;
#endif
  EMBER_FAIL(op, ": CUDA error on cuda:", device, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")",
             detail);
}

}  // namespace ember::cuda
