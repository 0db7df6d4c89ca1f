// The CPU backend's kernel-table entries (registered in cpu_backend.cc).
#pragma once

#include "core/backend.h"

namespace ember::cpu {

void copy_kernel(const StridedLoop& loop);
void fill_kernel(const StridedLoop& loop, Scalar value);
void unary_kernel(UnaryOp op, const StridedLoop& loop, double a, double b);
void unary_backward_kernel(UnaryOp op, const StridedLoop& loop, double a, double b);
void binary_kernel(BinaryOp op, const StridedLoop& loop);
void compare_kernel(CompareOp op, const StridedLoop& loop);
void where_kernel(const StridedLoop& loop);
void reduce_kernel(ReduceOp op, const ReduceLoop& loop, double p);
void arg_reduce_kernel(bool is_max, const ReduceLoop& loop);
void gemm_kernel(const GemmArgs& args);
void random_kernel(RandomKind kind, Device device, void* data, DType dtype, int64_t numel, PhiloxState state,
                   double a, double b);
void sgd_update_kernel(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                       const SgdUpdateArgs& args);
void adam_update_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamUpdateArgs& args);
Allocator* cpu_allocator(int device_index);
// Frees the large blocks the CPU allocator keeps for reuse; returns how many bytes that was.
size_t release_cached_cpu_memory();

}  // namespace ember::cpu
