// The kernel table: the narrow set of primitives a backend implements for one device type.
// core calls only these; the CPU backend (core/cpu) and the CUDA backend (cuda/) register
// themselves at start-up, so core never includes a backend header.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/loop.h"
#include "core/op_kinds.h"
#include "core/scalar.h"
#include "core/storage.h"

namespace ember {

// Row-major C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] for b in [0, batch).
struct GemmArgs {
  DType dtype = kFloat32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1.0, beta = 0.0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // in elements
};

enum class RandomKind : uint8_t { Uniform, Normal, Bernoulli, RandInt };

// Counter-based random state: element i of a fill gets Philox(key=seed, counter=offset+i),
// independent of how the fill is split across threads or devices.
struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

struct KernelTable {
  const char* name = "?";
  Allocator* (*allocator)(int device_index) = nullptr;
  // Elementwise over a StridedLoop; operand 0 is the output.
  void (*copy)(const StridedLoop& loop) = nullptr;  // casts between operand dtypes
  void (*fill)(const StridedLoop& loop, Scalar value) = nullptr;
  void (*unary)(UnaryOp op, const StridedLoop& loop, double a, double b) = nullptr;
  // Operands: grad_in (out), grad_out, x, y: the gradient of a unary op in one pass.
  void (*unary_backward)(UnaryOp op, const StridedLoop& loop, double a, double b) = nullptr;
  void (*binary)(BinaryOp op, const StridedLoop& loop) = nullptr;
  void (*compare)(CompareOp op, const StridedLoop& loop) = nullptr;  // out bool; inputs share a dtype
  void (*where)(const StridedLoop& loop) = nullptr;                   // out, condition (bool), a, b
  void (*reduce)(ReduceOp op, const ReduceLoop& loop, double p) = nullptr;
  void (*arg_reduce)(bool is_max, const ReduceLoop& loop) = nullptr;  // out values, out2 int64 indices
  void (*gemm)(const GemmArgs& args) = nullptr;
  // Fills a contiguous buffer of `numel` elements: Uniform [a, b), Normal(mean a, std b),
  // Bernoulli(p = a), RandInt [a, b).
  void (*random)(RandomKind kind, void* data, DType dtype, int64_t numel, PhiloxState state, double a,
                 double b) = nullptr;
  // Copies nbytes between devices of this backend's type and the CPU (either direction).
  void (*memcpy_device)(void* dst, Device dst_device, const void* src, Device src_device,
                        size_t nbytes) = nullptr;
};

void register_backend(DeviceType type, const KernelTable* table);
// The table for `device`, or an Error naming `op` when no backend is registered for it.
const KernelTable& kernels_for(Device device, const char* op);
bool has_backend(DeviceType type);

}  // namespace ember
