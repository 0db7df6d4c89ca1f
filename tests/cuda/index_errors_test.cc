// Out-of-range indices on cuda:0: gather, scatter_add and embedding raise the CPU's ember::Error
// (the op, the first bad index in row-major order, the dim and its size) at the next
// synchronisation with the device rather than from the call (which does not wait for the
// kernel), write nothing for the bad entries, and leave the device usable.
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <string>

#include <catch2/catch.hpp>

#include "autograd/functional.h"
#include "core/ember_core.h"
#include "cuda/api.h"

using namespace ember;

namespace {

const Device kCpu(kCPU);
const Device kCuda0 = Device::cuda(0);

// The message `fn` raises on `device`, or "" when it raises nothing.
template <typename Fn>
std::string error_on(Device device, Fn fn) {
  try {
    fn(device);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Tensor index_on(std::vector<int64_t> values, const Shape& shape, Device device) {
  return tensor(values, shape).to(device);
}

}  // namespace

TEST_CASE("gather on cuda:0 names the first out-of-range index, as the CPU does") {
  REQUIRE(cuda::device_count() >= 1);
  auto run = [](Device d) {
    Tensor input = arange(12, TensorOptions(kFloat32)).view({3, 4}).to(d);
    gather(input, 1, index_on({0, 3, 7, 1, 2, 5}, {3, 2}, d)).cpu();
  };
  const std::string expected = "gather: index 7 is out of bounds for dimension 1 with size 4";
  CHECK_THAT(error_on(kCpu, run), Catch::Matchers::Contains(expected));
  CHECK_THAT(error_on(kCuda0, run), Catch::Matchers::Contains(expected));
}

TEST_CASE("scatter_add on cuda:0 rejects a negative index through a strided index view") {
  REQUIRE(cuda::device_count() >= 1);
  auto run = [](Device d) {
    Tensor self = zeros({4, 3}, TensorOptions(kFloat64).device(d));
    Tensor index = index_on({1, 0, 2, 3, -2, 0}, {3, 2}, d).t();  // row-major: 1 2 -2 0 3 0
    scatter_add(self, 0, index, ones({2, 3}, TensorOptions(kFloat64).device(d)));
    cuda::synchronize();
  };
  const std::string expected = "scatter_add: index -2 is out of bounds for dimension 0 with size 4";
  CHECK_THAT(error_on(kCpu, run), Catch::Matchers::Contains(expected));
  CHECK_THAT(error_on(kCuda0, run), Catch::Matchers::Contains(expected));
}

TEST_CASE("embedding on cuda:0 rejects a row beyond the table") {
  REQUIRE(cuda::device_count() >= 1);
  Tensor weight = ones({5, 2}, TensorOptions(kFloat32).device(kCuda0));
  CHECK_THAT(error_on(kCuda0,
                      [&](Device d) {
                        embedding(weight, index_on({4, 5}, {2}, d)).sum().item<float>();
                      }),
             Catch::Matchers::Contains("gather: index 5 is out of bounds for dimension 0 with size 5"));
}

TEST_CASE("a bad index on cuda:0 writes nothing for itself, adds the good ones, and the device stays usable") {
  REQUIRE(cuda::device_count() >= 1);
  Tensor out = zeros({2, 3}, TensorOptions(kFloat32).device(kCuda0));
  Tensor index = index_on({0, 9, 1, 1, 1, -1}, {2, 3}, kCuda0);
  Tensor src = arange(1, 7, 1, TensorOptions(kFloat32)).view({2, 3}).to(kCuda0);
  // The table entry itself, so that the destination is kept after the error.
  kernels_for(kCuda0, "scatter_add").scatter_add(out, 0, index, src);
  CHECK_THROWS_AS(out.cpu(), Error);
  // Column j receives src[i][j] in row index[i][j]; index 9 (src 2) and -1 (src 6) go nowhere.
  CHECK(out.cpu().to_vector<float>() == std::vector<float>{1, 0, 0, 4, 5, 3});

  Tensor input = arange(6, TensorOptions(kFloat32)).view({2, 3}).to(kCuda0);
  Tensor picked = gather(input, 1, index_on({2, 0, 1, 1}, {2, 2}, kCuda0));
  CHECK(picked.cpu().to_vector<float>() == std::vector<float>{2, 0, 4, 4});
}

namespace {

// Holds a stream's queue until opened, or for 20 s at most.
struct Gate {
  std::shared_future<void> open;
  std::atomic<bool> timed_out{false};

  static void hold(void* self) {
    Gate* gate = static_cast<Gate*>(self);
    if (gate->open.wait_for(std::chrono::seconds(20)) != std::future_status::ready) gate->timed_out = true;
  }
};

}  // namespace

TEST_CASE("checked gathers on cuda:0 do not wait for the device, and the first failure is reported with a count") {
  REQUIRE(cuda::device_count() >= 1);
  Tensor input = arange(12, TensorOptions(kFloat32)).view({3, 4}).to(kCuda0);
  Tensor good = index_on({0, 3, 1, 2}, {2, 2}, kCuda0), bad = index_on({0, 4, -1, 2}, {2, 2}, kCuda0);
  std::promise<void> opener;
  Gate gate;
  gate.open = opener.get_future().share();
  REQUIRE(cudaLaunchHostFunc(cuda::current_stream(0).handle(), &Gate::hold, &gate) == cudaSuccess);
  // Queued behind the gate: had a call waited for its kernel, it would return only after 20 s.
  Tensor picked = gather(input, 1, good);
  gather(input, 0, bad);
  gather(input, 1, bad);
  opener.set_value();
  std::string message;
  try {
    cuda::synchronize(0);
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK_FALSE(gate.timed_out);
  CHECK_THAT(message, Catch::Matchers::Contains("gather: index 4 is out of bounds for dimension 0 with size 3") &&
                          Catch::Matchers::Contains("found on cuda:0") &&
                          Catch::Matchers::Contains("1 more checks failed"));
  CHECK(picked.cpu().to_vector<float>() == std::vector<float>{0, 3, 5, 6});
}

TEST_CASE("cross_entropy on cuda:0 reports an out-of-range class at the loss's item(), ignore_index passes") {
  REQUIRE(cuda::device_count() >= 1);
  Tensor logits = randn({4, 10}).to(kCuda0);
  Tensor ignored = index_on({3, -100, 9, 0}, {4}, kCuda0);
  CHECK(std::isfinite(cross_entropy(logits, ignored).item<float>()));
  const std::string message = error_on(kCuda0, [&](Device d) {
    cross_entropy(logits, index_on({3, 10, 9, 0}, {4}, d)).item<float>();
  });
  CHECK_THAT(message, Catch::Matchers::Contains("gather: index 10 is out of bounds for dimension 1 with size 10"));
  CHECK(std::isfinite(cross_entropy(logits, index_on({3, 1, 9, 0}, {4}, kCuda0)).item<float>()));
}
