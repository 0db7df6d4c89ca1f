// What the NCCL process group promises about streams and memory, on emulated devices (each rank
// on cuda:LOCAL_RANK): a collective waits for work the caller queued before it, wait() orders the
// caller's stream without blocking the host, tensors given to a collective are not reused by the
// caching allocator until it completes, and misuse names the rank and devices.
#include <catch2/catch.hpp>

#include "tests/stream_gate.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "comm/init.h"
#include "comm/mixed_process_group.h"
#include "comm/nccl/nccl_process_group.h"
#include "core/ember_core.h"
#include "cuda/api.h"

using namespace ember;

namespace {

Device my_device() { return Device::cuda(comm::read_environment().local_rank); }

using Gate = ember::testing::StreamGate;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

TEST_CASE("a collective waits for the caller's stream, and wait() does not block the host", "[comm][nccl]") {
  auto g = comm::init();
  const Device dev = my_device();
  cuda::DeviceGuard on(dev.index);
  Tensor t = full({1000}, static_cast<double>(g->rank() + 1), TensorOptions(kFloat32).device(dev));
  const Tensor two = scalar_tensor(2.0, kFloat32).to(dev);  // before the gate: a host copy would wait for it
  Gate gate;
  REQUIRE(cudaLaunchHostFunc(cuda::current_stream().handle(), &Gate::hold, &gate) == cudaSuccess);
  // Queued behind the gate: the input is written only once the caller's stream moves.
  {
    NoGradGuard no_grad;
    t.mul_(two);
  }
  const auto start = Clock::now();
  comm::WorkPtr work = g->all_reduce(t);
  work->wait();
  const double issue_seconds = seconds_since(start);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const bool ran_early = work->is_completed();
  gate.release();                // before any REQUIRE: a failed one would leave the stream held forever
  REQUIRE(issue_seconds < 5.0);  // neither call waited for the held stream
  REQUIRE_FALSE(ran_early);      // it cannot run before the caller's earlier work
  const double n = g->size();
  // Read back on the caller's stream, which wait() ordered after the collective.
  REQUIRE(t.to_vector<float>()[999] == static_cast<float>(2.0 * n * (n + 1) / 2));
  REQUIRE(work->is_completed());
}

TEST_CASE("a tensor dropped while its collective is in flight is not handed out again", "[comm][nccl]") {
  auto g = comm::init();
  if (g->size() < 2) return;
  const Device dev = my_device();
  cuda::DeviceGuard on(dev.index);
  const TensorOptions options = TensorOptions(kFloat32).device(dev);
  // Rank 1 arrives late, so rank 0's all-reduce is still in flight when it drops the tensor.
  if (g->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Tensor t = full({4096}, 1.0, options);
  const void* block = t.data_ptr();
  comm::WorkPtr work = g->all_reduce(t);
  t = Tensor();
  Tensor reuse = empty({4096}, options);
  if (g->rank() == 0) REQUIRE(reuse.data_ptr() != block);
  work->wait(std::chrono::seconds(60));
  REQUIRE(work->is_completed());
}

TEST_CASE("a tensor on another rank's device or the CPU is refused, naming both", "[comm][nccl]") {
  auto g = comm::init();
  if (g->size() < 2) return;
  const Device other = Device::cuda((my_device().index + 1) % g->size());
  const std::string expected = "rank " + std::to_string(g->rank()) + "'s NCCL group is on " + my_device().str() +
                               ", got a tensor on " + other.str();
  // The mixed group routes CUDA tensors to NCCL, which checks the device; made first with a good one.
  Tensor good = ones({2}, TensorOptions(kFloat32).device(my_device()));
  g->all_reduce(good)->wait();
  REQUIRE_THROWS_WITH(g->all_reduce(ones({2}, TensorOptions(kFloat32).device(other))),
                      Catch::Contains("all_reduce on WORLD") && Catch::Contains(expected));
  auto mixed = std::dynamic_pointer_cast<comm::MixedProcessGroup>(g);
  auto nccl = std::dynamic_pointer_cast<comm::nccl::NcclProcessGroup>(mixed ? mixed->device_group() : g);
  REQUIRE(nccl != nullptr);
  REQUIRE_THROWS_WITH(nccl->broadcast(ones({2}), 0), Catch::Contains("the NCCL backend takes CUDA tensors"));
  REQUIRE(nccl->device() == my_device());
  // The group's own stream, not the caller's.
  REQUIRE(nccl->stream() != cuda::current_stream(my_device().index));
}
