// Must die, for nccl_failures_test: host code reads an all-reduce's buffer while the all-reduce
// is still pending (rank 1 never arrives). Device memory stays unreadable outside the operation.
#include <cstdio>

#include "cuda/emu/emu.h"
#include "cuda/nccl.h"

int main() {
  ember::emu::set_device_count(2);
  ncclComm_t comms[2];
  if (ncclCommInitAll(comms, 2, nullptr) != ncclSuccess) return 2;
  float* x = nullptr;
  cudaSetDevice(0);
  cudaMalloc(reinterpret_cast<void**>(&x), 1024 * sizeof(float));
  cudaMemset(x, 0, 1024 * sizeof(float));
  ncclAllReduce(x, x, 1024, ncclFloat32, ncclSum, comms[0], nullptr);
  std::printf("must not get here: read %f\n", static_cast<double>(x[3]));
  return 0;
}
