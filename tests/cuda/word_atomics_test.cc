// scatter_add on cuda:0 into 8- and 16-bit tensors whose byte count is not a whole number of
// 32-bit words. Their atomics swap the aligned word holding the element, so that word must lie
// inside the tensor's storage: in the emulator's checking mode every byte past a storage is
// guarded, and under AddressSanitizer a read of it is reported. The sums match the CPU's.
#include <catch2/catch.hpp>

#include <vector>

#include "autograd/functional.h"
#include "core/ember_core.h"
#include "cuda/api.h"
#include "cuda/emu/check_mode.h"

using namespace ember;

TEST_CASE("scatter_add into the last element of odd-sized 8- and 16-bit tensors stays inside their storage") {
  REQUIRE(cuda::device_count() >= 1);
  emu::set_checking(true);
  for (DType dtype : {kUInt8, kBFloat16, kFloat16}) {
    for (int64_t n : {1, 3, 1001}) {
      INFO(dtype_name(dtype) << ", " << n << " elements");
      auto sums = [&](Device d) {
        Tensor self = zeros({n}, TensorOptions(dtype).device(d));
        Tensor index = full({4}, n - 1, TensorOptions(kInt64).device(d));
        Tensor src = ones({4}, TensorOptions(dtype).device(d));
        return scatter_add(self, 0, index, src).cpu().to(kFloat64).to_vector<double>();
      };
      const std::vector<double> on_cuda = sums(Device::cuda(0));
      CHECK(on_cuda == sums(Device(kCPU)));
      CHECK(on_cuda.back() == 4.0);
      cuda::synchronize();  // a guard found changed would raise here
    }
  }
  emu::set_checking(false);
}
