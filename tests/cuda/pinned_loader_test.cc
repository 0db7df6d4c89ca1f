// DataLoader batches in pinned memory: the same values as pageable batches, from worker threads
// too, and a non-blocking copy of them to cuda:0 arrives intact.
#include <catch2/catch.hpp>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "data/data.h"

using namespace ember;
using namespace ember::data;

TEST_CASE("pinned batches equal pageable ones and arrive intact on cuda:0 through non-blocking copies") {
  REQUIRE(cuda::device_count() >= 1);
  auto ds = std::make_shared<SyntheticDataset>(23, Shape{3, 5, 7}, 10, 3);
  for (int workers : {0, 2}) {
    INFO("workers " << workers);
    DataLoader plain(ds, DataLoaderOptions(4).workers(workers).shuffle(true).seed(9));
    DataLoader pinned(ds, DataLoaderOptions(4).workers(workers).shuffle(true).seed(9).pin_memory(true));
    std::vector<Batch> expected;
    for (Batch& b : plain) expected.push_back(b);
    size_t i = 0;
    for (Batch& b : pinned) {
      REQUIRE(i < expected.size());
      CHECK(b.data.is_pinned());
      CHECK(b.target.is_pinned());
      Tensor on_gpu = b.data.to(Device::cuda(0), /*non_blocking=*/true);
      Tensor target = b.target.to(Device::cuda(0), /*non_blocking=*/true);
      CHECK(on_gpu.cpu().to_vector<float>() == expected[i].data.to_vector<float>());
      CHECK(target.cpu().to_vector<int64_t>() == expected[i].target.to_vector<int64_t>());
      CHECK(b.indices == expected[i].indices);
      ++i;
    }
    CHECK(i == expected.size());
  }
}
