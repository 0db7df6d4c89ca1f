// Registers the CPU kernel table at start-up (this library is alwayslink).
#include "core/cpu/kernels.h"

namespace ember::cpu {

namespace {

const KernelTable& cpu_table() {
  static const KernelTable table = [] {
    KernelTable t;
    t.name = "cpu";
    t.allocator = &cpu_allocator;
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
