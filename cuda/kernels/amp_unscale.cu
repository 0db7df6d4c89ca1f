// amp_unscale on a CUDA device: one launch over every grad of the call. The grads' table (data,
// size, dtype, first chunk) reaches the device by a copy from pageable memory, which CUDA stages at
// the call, so the host waits for nothing; blocks take chunks of kChunk elements grid-stride and
// find their grad by binary search. found_inf is written by the threads that met an inf or a NaN.
#include <vector>

#include "core/amp_unscale_math.h"
#include "core/factory.h"
#include "cuda/kernels/entries.h"
#include "cuda/kernels/loops.cuh"

namespace ember::cuda {

namespace {

constexpr int64_t kChunk = kBlockThreads * 8;

struct GradSlot {
  char* data;
  int64_t numel;
  int64_t first_chunk;  // the chunks of the grads before this one
  DType dtype;
};

template <typename T>
__device__ bool unscale_span(char* data, int64_t begin, int64_t end, float inv_scale) {
  T* values = reinterpret_cast<T*>(data);
  bool non_finite = false;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    values[i] = formula::unscale_element(values[i], inv_scale, non_finite);
  return non_finite;
}

// inv_scale comes from device memory (inv_scale_ptr) or, when that is null, by value.
__global__ void __launch_bounds__(kBlockThreads)
    amp_unscale_grads(const GradSlot* slots, int count, int64_t chunks, const float* inv_scale_ptr,
                      float inv_scale_value, float* found_inf) {
  const float inv_scale = inv_scale_ptr != nullptr ? *inv_scale_ptr : inv_scale_value;
  bool non_finite = false;
  for (int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    // The last slot that starts at or before this chunk (every slot has at least one).
    int lo = 0, hi = count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (slots[mid].first_chunk <= chunk)
        lo = mid;
      else
        hi = mid - 1;
    }
    const GradSlot slot = slots[lo];
    const int64_t begin = (chunk - slot.first_chunk) * kChunk;
    const int64_t end = begin + kChunk < slot.numel ? begin + kChunk : slot.numel;
    switch (slot.dtype) {
      case kFloat32:
        non_finite |= unscale_span<float>(slot.data, begin, end, inv_scale);
        break;
      case kFloat64:
        non_finite |= unscale_span<double>(slot.data, begin, end, inv_scale);
        break;
      case kBFloat16:
        non_finite |= unscale_span<BFloat16>(slot.data, begin, end, inv_scale);
        break;
      default:
        non_finite |= unscale_span<Half>(slot.data, begin, end, inv_scale);
        break;
    }
  }
  if (non_finite) *found_inf = 1.0f;
}

}  // namespace

void amp_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf) {
  const char* op = "amp_unscale_";
  std::vector<GradSlot> slots;
  int64_t chunks = 0;
  for (const Tensor& grad : grads) {
    const DType dtype = grad.dtype();
    if (dtype != kFloat32 && dtype != kFloat64 && dtype != kBFloat16 && dtype != kFloat16)
      detail::unsupported_dtype(op, dtype);
    if (grad.numel() == 0) continue;  // no chunk of its own: the search would land on it
    slots.push_back({static_cast<char*>(grad.data_ptr()), grad.numel(), chunks, dtype});
    chunks += (grad.numel() + kChunk - 1) / kChunk;
  }
  if (slots.empty()) return;
  const Device device = found_inf.device();
  DeviceGuard guard(device.index);
  const cudaStream_t stream = current_stream().handle();
  const int64_t bytes = static_cast<int64_t>(slots.size() * sizeof(GradSlot));
  // Freed at return: the stream's later work runs after the kernel that reads it.
  Tensor table = empty({bytes}, TensorOptions(kUInt8).device(device));
  check(cudaMemcpyAsync(table.data_ptr(), slots.data(), static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream),
        op);
  const bool inv_on_host = inv_scale.device().is_cpu();
  const float* inv_scale_ptr = inv_on_host ? nullptr : static_cast<const float*>(inv_scale.data_ptr());
  const float inv_scale_value = inv_on_host ? *static_cast<const float*>(inv_scale.data_ptr()) : 0.0f;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(chunks, 4096));
  EMBER_LAUNCH(amp_unscale_grads, dim3(blocks), dim3(kBlockThreads), 0, stream,
               static_cast<const GradSlot*>(table.data_ptr()), static_cast<int>(slots.size()), chunks, inv_scale_ptr,
               inv_scale_value, static_cast<float*>(found_inf.data_ptr()));
  check_launch(op);
}

}  // namespace ember::cuda
