// Random fill kernel: element i takes random_element(seed, offset + i), whichever thread makes it.
#include "core/random_math.h"
#include "cuda/kernels/loops.cuh"
#include "cuda/kernels/entries.h"

namespace ember::cuda {

namespace {

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    random_fill_kernel(T* out, int64_t numel, RandomKind kind, PhiloxState state, double a, double b) {
  for (const int64_t i : grid_stride(numel))
    out[i] = random_element<T>(kind, state.seed, state.offset + static_cast<uint64_t>(i), a, b);
}

}  // namespace

void random_kernel(RandomKind kind, Device device, void* data, DType dtype, int64_t numel, PhiloxState state, double a,
                   double b) {
  if (numel == 0) return;
  DeviceGuard guard(device.index);
  cudaStream_t stream = current_stream().handle();
  EMBER_DISPATCH_ALL(dtype, "random", [&] {
    EMBER_LAUNCH(random_fill_kernel<scalar_t>, dim3(grid_for(numel)), dim3(kBlockThreads), 0, stream,
                 static_cast<scalar_t*>(data), numel, kind, state, a, b);
  });
  check_launch("random");
}

}  // namespace ember::cuda
