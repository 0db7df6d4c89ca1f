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
  std::string text = cudaGetErrorString(error);
#if !defined(EMBER_CUDA)
  // The emulator's text carries the device's failure when `error` is the code it set; another
  // code (a bad copy's cudaErrorInvalidValue) gets it here, once.
  const std::string detail = emu::failure_message();
  if (!detail.empty() && text.find(detail) == std::string::npos) text += ": " + detail;
#endif
  EMBER_FAIL(op, ": CUDA error on cuda:", device, ": ", cudaGetErrorName(error), ": ", text);
}

}  // namespace ember::cuda
