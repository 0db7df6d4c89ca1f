// Copies and conversions: dtype casts, device transfers, pinned memory, clone, and copy_into.
#include "core/autograd_hooks.h"
#include "core/backend.h"
#include "core/factory.h"
#include "core/ops.h"
#include "core/profiler.h"

namespace ember {

void copy_into(const Tensor& dst, const Tensor& src, bool non_blocking) {
  EMBER_CHECK(dst.defined() && src.defined(), "copy_: expected defined tensors");
  Shape shape = broadcast_shapes(dst.sizes(), src.sizes(), "copy_");
  EMBER_CHECK(shape == dst.sizes(), "copy_: source of shape ", shape_str(src.sizes()),
              " cannot be broadcast to destination of shape ", shape_str(dst.sizes()));
  if (dst.numel() == 0) return;
  Tensor expanded = src.detach().expand(dst.sizes());
  if (dst.device() == src.device()) {
    StridedLoop loop = make_loop({&dst, &expanded}, "copy_");
    kernels_for(dst.device(), "copy_").copy(loop);
    return;
  }
  // Across devices: contiguous data of dst's dtype made on the source's device, one memcpy between
  // the devices (peer to peer between two GPUs), then dst's own layout made on its device.
  const Device remote = dst.device().is_cpu() ? src.device() : dst.device();
  const DeviceRuntime& k = runtime_for(remote, "copy_");
  EMBER_CHECK(k.memcpy_device != nullptr, "copy_: backend ", k.name, " cannot copy between devices");
  Tensor staged_src = expanded.to(dst.dtype()).contiguous();
  Tensor staged_dst = dst.is_contiguous() ? dst : empty(dst.sizes(), dst.options());
  // Asynchronous only from and into pinned memory the caller holds. A staging buffer on the host
  // (freed or read before the copy ran) is never pinned, so pinned here means the caller's.
  const Tensor& host_side = dst.device().is_cpu() ? staged_dst : staged_src;
  const bool host_pinned = host_side.is_pinned();
  // Host time of the call: the copy itself when it blocks, its queueing when asynchronous.
  const profiler::Range range(
      "copy", profiler::active() ? src.device().str() + " -> " + dst.device().str() : std::string(),
      profiler::active() ? profiler::Args{{"bytes", std::to_string(staged_src.nbytes())},
                                          {"asynchronous", non_blocking && host_pinned ? "yes" : "no"}}
                         : profiler::Args{});
  k.memcpy_device(staged_dst.data_ptr(), staged_dst.device(), staged_src.data_ptr(), staged_src.device(),
                  staged_src.nbytes(), non_blocking && host_pinned);
  if (!staged_dst.is_same(dst)) copy_into(dst, staged_dst);
}

Tensor Tensor::pin_memory() const {
  EMBER_CHECK(device().is_cpu(), "pin_memory: expected a CPU tensor, got one on ", device().str());
  if (is_pinned()) return *this;
  const DeviceRuntime* cuda = find_runtime(kCUDA);
  EMBER_CHECK(cuda != nullptr && cuda->pinned_allocator != nullptr,
              "pin_memory: pinned memory needs the CUDA backend, which this program does not link (//cuda)");
  auto storage = std::make_shared<StorageImpl>(nbytes(), Device(kCPU), cuda->pinned_allocator());
  Tensor out(std::make_shared<TensorImpl>(std::move(storage), sizes(), contiguous_strides(sizes()), 0, dtype()));
  copy_into(out, *this);
  return out;
}

bool Tensor::is_pinned() const { return device().is_cpu() && storage()->is_pinned(); }

namespace {
// A destination for a conversion of x: x's dense layout is kept, like PyTorch's preserve_format.
Tensor converted_like(const Tensor& x, DType dtype, Device device) {
  TensorOptions options = TensorOptions(dtype).device(device);
  if (!x.is_contiguous() && is_dense(x)) return empty_strided(x.sizes(), x.strides(), options);
  return empty(x.sizes(), options);
}
}  // namespace

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  if (needs_grad({&x}) && is_floating(dtype)) return autograd_hooks()->convert(x, dtype, x.device());
  Tensor out = converted_like(x, dtype, x.device());
  copy_into(out, x);
  return out;
}

Tensor to_device(const Tensor& x, Device device, bool non_blocking) {
  if (x.device() == device) return x;
  if (needs_grad({&x})) return autograd_hooks()->convert(x, x.dtype(), device);
  Tensor out = converted_like(x, x.dtype(), device);
  copy_into(out, x, non_blocking);
  return out;
}

Tensor clone(const Tensor& x, bool contiguous) {
  if (needs_grad({&x})) return autograd_hooks()->clone(x, contiguous);
  Tensor out = contiguous ? empty(x.sizes(), x.options()) : empty_like(x);
  copy_into(out, x);
  return out;
}

Tensor Tensor::clone() const { return ember::clone(*this); }
Tensor Tensor::to(DType dtype) const { return to_dtype(*this, dtype); }
Tensor Tensor::to(Device device) const { return to_device(*this, device); }
Tensor Tensor::to(Device device, bool non_blocking) const { return to_device(*this, device, non_blocking); }

}  // namespace ember
