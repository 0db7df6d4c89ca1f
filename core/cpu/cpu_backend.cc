// Registers the CPU kernel table at start-up (this library is alwayslink).
#include "core/cpu/kernels.h"
#include "core/cpu/nn_kernels.h"

namespace ember::cpu {

namespace {

const KernelTable& cpu_table() {
  static const KernelTable table = [] {
    KernelTable t;
    t.name = "cpu";
    t.device_count = [] { return 1; };
    t.allocator = &cpu_allocator;
    t.synchronize = [](Device) {};  // CPU kernels finish before they return
    t.copy = &copy_kernel;
    t.fill = &fill_kernel;
    t.unary = &unary_kernel;
    t.unary_backward = &unary_backward_kernel;
    t.binary = &binary_kernel;
    t.compare = &compare_kernel;
    t.where = &where_kernel;
    t.reduce = &reduce_kernel;
    t.arg_reduce = &arg_reduce_kernel;
    t.gemm = &gemm_kernel;
    t.random = &random_kernel;
    t.conv2d = &conv2d_kernel;
    t.conv2d_backward_input = &conv2d_backward_input_kernel;
    t.conv2d_backward_weight = &conv2d_backward_weight_kernel;
    t.max_pool2d = &max_pool2d_kernel;
    t.max_pool2d_backward = &max_pool2d_backward_kernel;
    t.avg_pool2d = &avg_pool2d_kernel;
    t.avg_pool2d_backward = &avg_pool2d_backward_kernel;
    t.adaptive_avg_pool2d = &adaptive_avg_pool2d_kernel;
    t.adaptive_avg_pool2d_backward = &adaptive_avg_pool2d_backward_kernel;
    t.batch_norm_stats = &batch_norm_stats_kernel;
    t.batch_norm_apply = &batch_norm_apply_kernel;
    t.batch_norm_backward_reduce = &batch_norm_backward_reduce_kernel;
    t.batch_norm_backward_input = &batch_norm_backward_input_kernel;
    t.softmax = &softmax_kernel;
    t.softmax_backward = &softmax_backward_kernel;
    t.gather = &gather_kernel;
    t.scatter_add = &scatter_add_kernel;
    t.sgd_update = &sgd_update_kernel;
    t.adam_update = &adam_update_kernel;
    return t;
  }();
  return table;
}

const bool registered = [] {
  register_backend(kCPU, &cpu_table());
  return true;
}();

}  // namespace

}  // namespace ember::cpu
