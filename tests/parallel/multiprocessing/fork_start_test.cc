// The fork start method: allowed while the process is single-threaded and has no CUDA context,
// refused (saying why) once either holds; and CUDA tensors are refused by share_memory_, Module::
// share_memory and Queue. The cases run in order: the first needs a process with no threads yet.
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/ember_core.h"
#include "cuda/api.h"
#include "nn/nn.h"
#include "parallel/multiprocessing/multiprocessing.h"

using namespace ember;
namespace mp = ember::multiprocessing;

namespace {

void write_rank(int rank, int, mp::Shared& shared) { shared.tensor("out").data_ptr<int64_t>()[rank] = rank + 7; }
EMBER_SPAWN_ENTRY(write_rank);

}  // namespace

TEST_CASE("fork works in a single-threaded process") {
  Tensor out = zeros({3}, kInt64).share_memory_();
  mp::SpawnOptions fork;
  fork.start_method = mp::StartMethod::kFork;
  mp::spawn(3, write_rank, mp::Shared().add("out", out), fork);
  for (int r = 0; r < 3; ++r) CHECK(out.select(0, r).item<int64_t>() == r + 7);
}

TEST_CASE("fork is refused while other threads run") {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::thread other([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });
  });
  Tensor out = zeros({2}, kInt64).share_memory_();
  mp::SpawnOptions fork;
  fork.start_method = mp::StartMethod::kFork;
  CHECK_THROWS_WITH(mp::spawn(2, write_rank, mp::Shared().add("out", out), fork),
                    Catch::Contains("needs a single-threaded process, but this one runs 2 threads"));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  other.join();
  // The default start method does not care.
  mp::spawn(2, write_rank, mp::Shared().add("out", out));
  CHECK(out.select(0, 1).item<int64_t>() == 8);
}

TEST_CASE("after CUDA is used, fork is refused and CUDA tensors are not shared") {
  REQUIRE(cuda::device_count() >= 1);
  Tensor out = zeros({2}, kInt64).share_memory_();
  mp::SpawnOptions fork;
  fork.start_method = mp::StartMethod::kFork;
  CHECK_THROWS_WITH(mp::spawn(2, write_rank, mp::Shared().add("out", out), fork),
                    Catch::Contains("refused once the process has used CUDA"));
  Tensor gpu = ones({4}, Device(kCUDA, 0));
  CHECK_THROWS_WITH(gpu.share_memory_(),
                    Catch::Contains("share_memory_: only CPU tensors") && Catch::Contains("cuda:0"));
  nn::Linear lin(3, 2);
  lin->to(Device(kCUDA, 0));
  CHECK_THROWS_WITH(lin->share_memory(), Catch::Contains("parameter 'weight' is on cuda:0"));
  mp::Queue q;
  CHECK_THROWS_WITH(q.put(gpu), Catch::Contains("only CPU tensors can be sent to another process, got one on cuda:0"));
}
