// The emulated NCCL's promise: what would hang, corrupt or deadlock with NCCL on GPUs fails here,
// loudly. Calls return before their work runs; a peer that never arrives leaves the operation
// pending until ncclCommAbort fails it; ranks that disagree on a collective fail naming the
// disagreement; ungrouped sends and receives that wait on each other deadlock; one thread cannot
// drive two ranks without a group; bad buffers and arguments are refused at the call; a peer that
// destroyed its communicator or whose process ended fails its waiting peers; host code cannot read
// a buffer whose operation has not run.
#include <catch2/catch.hpp>

#include "tests/stream_gate.h"

#include <spawn.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "cuda/emu/emu.h"
#include "tests/cuda/nccl_ranks.h"
#include "tests/cuda/nccl_values.h"

extern char** environ;

using namespace ember::testing;

namespace {

using Gate = ember::testing::StreamGate;

// Long enough for a wrongly completing operation to have completed.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(slow_mode() ? 100 : 30)); }

// The sticky error a failed NCCL operation left on `device`, and the emulator's reason; the device
// is reset for the next case.
std::string failure_on(int device, cudaStream_t stream) {
  REQUIRE(cudaStreamSynchronize(stream) == cudaErrorLaunchFailure);
  REQUIRE_CUDA(cudaSetDevice(device));
  return ember::emu::failure_message();
}

void reset_devices(int n) {
  for (int d = 0; d < n; ++d) {
    cudaSetDevice(d);
    cudaDeviceReset();
  }
  cudaGetLastError();
}

ncclResult_t async_error(ncclComm_t comm) {
  ncclResult_t e = ncclInternalError;
  REQUIRE_NCCL(ncclCommGetAsyncError(comm, &e));
  return e;
}

std::vector<float> iota_floats(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

std::vector<char> bytes_of(const std::vector<float>& v) {
  return std::vector<char>(reinterpret_cast<const char*>(v.data()), reinterpret_cast<const char*>(v.data() + v.size()));
}

}  // namespace

TEST_CASE("a collective returns at once and completes when the last rank's stream reaches it", "[nccl]") {
  Ranks ranks(2);
  DeviceBuffer x0(0, bytes_of(iota_floats(1000, 0))), x1(1, bytes_of(iota_floats(1000, 1)));
  Gate gate;
  REQUIRE_CUDA(cudaLaunchHostFunc(ranks.stream(1), &Gate::hold, &gate));
  REQUIRE_NCCL(ncclGroupStart());
  REQUIRE_NCCL(ncclAllReduce(x0.ptr, x0.ptr, 1000, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
  REQUIRE_NCCL(ncclAllReduce(x1.ptr, x1.ptr, 1000, ncclFloat32, ncclSum, ranks.comm(1), ranks.stream(1)));
  REQUIRE_NCCL(ncclGroupEnd());  // returned although rank 1's stream is held
  settle();
  // Rank 0's stream reached the collective and waits there, on the device, for rank 1.
  CHECK(cudaStreamQuery(ranks.stream(0)) == cudaErrorNotReady);
  CHECK(cudaStreamQuery(ranks.stream(1)) == cudaErrorNotReady);
  CHECK(async_error(ranks.comm(0)) == ncclSuccess);
  gate.release();
  ranks.synchronize();
  std::vector<char> got = x0.download();
  const float* sums = reinterpret_cast<const float*>(got.data());
  for (size_t i = 0; i < 1000; ++i) REQUIRE(sums[i] == static_cast<float>(2 * i + 1));
  REQUIRE(x1.download() == got);
}

TEST_CASE("a peer that never arrives leaves the collective pending until ncclCommAbort fails it", "[nccl]") {
  for (int aborter : {0, 1}) {
    INFO("rank " << aborter << " aborts");
    {
      Ranks ranks(2);
      DeviceBuffer x(0, 4096);
      REQUIRE_NCCL(ncclAllReduce(x.ptr, x.ptr, 1024, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
      settle();
      CHECK(cudaStreamQuery(ranks.stream(0)) == cudaErrorNotReady);  // a watchdog must catch this
      CHECK(async_error(ranks.comm(0)) == ncclSuccess);
      REQUIRE_NCCL(ncclCommAbort(ranks.comm(aborter)));
      ranks.forget(aborter);
      const std::string why = failure_on(0, ranks.stream(0));
      INFO(why);
      CHECK(why.find("ncclAllReduce #0 on cuda:0 (rank 0 of 2) failed") != std::string::npos);
      CHECK(why.find("rank " + std::to_string(aborter) + " (cuda:" + std::to_string(aborter) + ", pid") !=
            std::string::npos);
      CHECK(why.find("called ncclCommAbort") != std::string::npos);
      const int survivor = 1 - aborter;
      CHECK(async_error(ranks.comm(survivor)) == ncclRemoteError);
      CHECK(std::string(ncclGetLastError(ranks.comm(survivor))).find("ncclCommAbort") != std::string::npos);
      // A failed communicator refuses new work at the call.
      CHECK(ncclAllReduce(x.ptr, x.ptr, 1, ncclFloat32, ncclSum, ranks.comm(survivor), ranks.stream(survivor)) ==
            ncclRemoteError);
    }
    reset_devices(2);
  }
}

TEST_CASE("ranks that disagree on a collective fail on every rank, naming the disagreement", "[nccl]") {
  struct Case {
    const char* what;
    std::function<ncclResult_t(int rank, void* x, ncclComm_t comm, cudaStream_t stream)> call;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"count",
       [](int r, void* x, ncclComm_t c, cudaStream_t s) {
         return ncclAllReduce(x, x, r == 0 ? 1000 : 999, ncclFloat32, ncclSum, c, s);
       },
       {"ranks disagree on the count of collective #0 (ncclAllReduce): rank 0 passed 1000, rank 1 passed 999"}},
      {"datatype",
       [](int r, void* x, ncclComm_t c, cudaStream_t s) {
         return ncclAllReduce(x, x, 100, r == 0 ? ncclFloat32 : ncclInt32, ncclSum, c, s);
       },
       {"datatype", "rank 0 passed ncclFloat32, rank 1 passed ncclInt32"}},
      {"reduction",
       [](int r, void* x, ncclComm_t c, cudaStream_t s) {
         return ncclReduceScatter(x, static_cast<float*>(x) + 10 * r, 10, ncclFloat32, r == 0 ? ncclSum : ncclMax, c,
                                  s);
       },
       {"reduction", "ncclReduceScatter", "rank 0 passed ncclSum, rank 1 passed ncclMax"}},
      {"root",
       [](int r, void* x, ncclComm_t c, cudaStream_t s) { return ncclBroadcast(x, x, 100, ncclFloat32, r, c, s); },
       {"root", "rank 0 passed 0, rank 1 passed 1"}},
      {"collective",
       [](int r, void* x, ncclComm_t c, cudaStream_t s) {
         return r == 0 ? ncclAllReduce(x, x, 100, ncclFloat32, ncclSum, c, s)
                       : ncclBroadcast(x, x, 100, ncclFloat32, 0, c, s);
       },
       {"different collectives", "rank 0 called ncclAllReduce, rank 1 called ncclBroadcast"}},
  };
  for (const Case& c : cases) {
    INFO("disagreeing on the " << c.what);
    {
      Ranks ranks(2);
      DeviceBuffer x0(0, 4000), x1(1, 4000);
      REQUIRE_NCCL(ncclGroupStart());
      REQUIRE_NCCL(c.call(0, x0.ptr, ranks.comm(0), ranks.stream(0)));
      REQUIRE_NCCL(c.call(1, x1.ptr, ranks.comm(1), ranks.stream(1)));
      REQUIRE_NCCL(ncclGroupEnd());
      for (int r = 0; r < 2; ++r) {
        const std::string why = failure_on(r, ranks.stream(r));
        const std::string last = ncclGetLastError(ranks.comm(r));
        INFO("rank " << r << ": " << why);
        CHECK(why.find("on cuda:" + std::to_string(r) + " (rank " + std::to_string(r) + " of 2)") != std::string::npos);
        for (const std::string& word : c.words) {
          CHECK(why.find(word) != std::string::npos);
          CHECK(last.find(word) != std::string::npos);
        }
        CHECK(async_error(ranks.comm(r)) == ncclInvalidUsage);
      }
    }
    reset_devices(2);
  }
}

TEST_CASE("a receive that does not match its send fails both ranks", "[nccl]") {
  {
    Ranks ranks(2);
    DeviceBuffer x0(0, 400), x1(1, 400);
    REQUIRE_NCCL(ncclGroupStart());
    REQUIRE_NCCL(ncclSend(x0.ptr, 100, ncclFloat32, 1, ranks.comm(0), ranks.stream(0)));
    REQUIRE_NCCL(ncclRecv(x1.ptr, 99, ncclFloat32, 0, ranks.comm(1), ranks.stream(1)));
    REQUIRE_NCCL(ncclGroupEnd());
    for (int r = 0; r < 2; ++r) {
      const std::string why = failure_on(r, ranks.stream(r));
      INFO(why);
      CHECK(why.find("rank 0 sends 100 x ncclFloat32 to rank 1") != std::string::npos);
      CHECK(why.find("which receives 99 x ncclFloat32") != std::string::npos);
    }
  }
  reset_devices(2);
}

TEST_CASE("ungrouped sends and receives that wait on each other deadlock, as NCCL's do", "[nccl]") {
  {
    Ranks ranks(2);
    DeviceBuffer send0(0, 400), recv0(0, 400), send1(1, 400), recv1(1, 400);
    // Each rank sends first: a send completes only when its receiver has taken it, and each
    // receive is queued behind its own rank's send.
    auto rank = [&](int r, DeviceBuffer& send, DeviceBuffer& recv) {
      ncclSend(send.ptr, 100, ncclFloat32, 1 - r, ranks.comm(r), ranks.stream(r));
      ncclRecv(recv.ptr, 100, ncclFloat32, 1 - r, ranks.comm(r), ranks.stream(r));
    };
    std::thread t0(rank, 0, std::ref(send0), std::ref(recv0)), t1(rank, 1, std::ref(send1), std::ref(recv1));
    t0.join();
    t1.join();
    settle();
    CHECK(cudaStreamQuery(ranks.stream(0)) == cudaErrorNotReady);
    CHECK(cudaStreamQuery(ranks.stream(1)) == cudaErrorNotReady);
    REQUIRE_NCCL(ncclCommAbort(ranks.comm(0)));
    ranks.forget(0);
    CHECK(failure_on(0, ranks.stream(0)).find("ncclSend #0 to rank 1") != std::string::npos);
    CHECK(failure_on(1, ranks.stream(1)).find("ncclSend #0 to rank 0") != std::string::npos);
  }
  reset_devices(2);
}

TEST_CASE("one thread queuing ungrouped collectives for two ranks is refused (NCCL deadlocks)", "[nccl]") {
  Ranks ranks(2);
  DeviceBuffer x0(0, 400), x1(1, 400);
  REQUIRE_NCCL(ncclAllReduce(x0.ptr, x0.ptr, 100, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
  CHECK(ncclAllReduce(x1.ptr, x1.ptr, 100, ncclFloat32, ncclSum, ranks.comm(1), ranks.stream(1)) == ncclInvalidUsage);
  CHECK(std::string(ncclGetLastError(nullptr)).find("between ncclGroupStart and ncclGroupEnd") != std::string::npos);
  // Rank 1's part from a thread of its own completes it.
  std::thread other([&] { ncclAllReduce(x1.ptr, x1.ptr, 100, ncclFloat32, ncclSum, ranks.comm(1), ranks.stream(1)); });
  other.join();
  ranks.synchronize();
}

TEST_CASE("bad buffers, streams, types, ops, roots and handles are refused at the call", "[nccl]") {
  Ranks ranks(2);
  DeviceBuffer on0(0, 400), on1(1, 400);
  std::vector<float> host(100);
  ncclComm_t c = ranks.comm(0);
  cudaStream_t s = ranks.stream(0);
  auto refused = [](ncclResult_t got, ncclResult_t expected, const std::string& words) {
    const std::string why = ncclGetLastError(nullptr);
    INFO(why);
    CHECK(got == expected);
    CHECK(why.find(words) != std::string::npos);
  };
  refused(ncclAllReduce(host.data(), on0.ptr, 100, ncclFloat32, ncclSum, c, s), ncclInvalidArgument,
          "sendbuff (400 bytes at");
  refused(ncclAllReduce(on0.ptr, on0.ptr, 129, ncclFloat32, ncclSum, c, s), ncclInvalidArgument,
          "516 bytes at");  // past the allocation (cudaMalloc rounds 400 bytes up to 512)
  refused(ncclAllReduce(on1.ptr, on0.ptr, 100, ncclFloat32, ncclSum, c, s), ncclInvalidArgument,
          "sendbuff is memory of cuda:1, but the rank is on cuda:0");
  refused(ncclAllReduce(on0.ptr, on0.ptr, 100, ncclFloat32, ncclSum, c, ranks.stream(1)), ncclInvalidArgument,
          "the stream belongs to cuda:1");
  refused(ncclAllReduce(on0.ptr, on0.ptr, 100, ncclFloat8e4m3, ncclSum, c, s), ncclInvalidArgument,
          "ncclFloat8e4m3 (10) is not supported");
  refused(ncclAllReduce(on0.ptr, on0.ptr, 100, ncclFloat32, static_cast<ncclRedOp_t>(9), c, s), ncclInvalidArgument,
          "invalid reduction op 9");
  refused(ncclBroadcast(on0.ptr, on0.ptr, 100, ncclFloat32, 2, c, s), ncclInvalidArgument, "root 2 is not a rank");
  refused(ncclSend(on0.ptr, 100, ncclFloat32, -1, c, s), ncclInvalidArgument, "peer -1 is not a rank");
  refused(ncclAllReduce(on0.ptr, on0.at(4), 50, ncclFloat32, ncclSum, c, s), ncclInvalidArgument,
          "overlap, but not in the in-place layout");
  refused(ncclAllGather(on0.at(4), on0.ptr, 50, ncclFloat32, c, s), ncclInvalidArgument, "in-place layout");
  // One bad call fails its whole group: nothing of it runs.
  REQUIRE_NCCL(ncclGroupStart());
  REQUIRE_NCCL(ncclAllReduce(on0.ptr, on0.ptr, 100, ncclFloat32, ncclSum, c, s));
  CHECK(ncclAllReduce(host.data(), host.data(), 100, ncclFloat32, ncclSum, ranks.comm(1), ranks.stream(1)) ==
        ncclInvalidArgument);
  CHECK(ncclGroupEnd() == ncclInvalidArgument);
  settle();
  CHECK(cudaStreamQuery(s) == cudaSuccess);
  CHECK(ncclGroupEnd() == ncclInvalidUsage);  // no group open
  // A destroyed communicator is no longer a communicator.
  REQUIRE_NCCL(ncclCommDestroy(c));
  ranks.forget(0);
  refused(ncclAllReduce(on0.ptr, on0.ptr, 100, ncclFloat32, ncclSum, c, s), ncclInvalidArgument,
          "comm is not a live communicator");
  ncclResult_t ignored;
  CHECK(ncclCommGetAsyncError(c, &ignored) == ncclInvalidArgument);
  // Every device a rank of its own.
  ncclComm_t two[2];
  const int same[2] = {1, 1};
  refused(ncclCommInitAll(two, 2, same), ncclInvalidUsage, "Duplicate GPU");
  ncclUniqueId zeros{};
  refused(ncclCommInitRank(two, 2, zeros, 0), ncclInvalidArgument, "does not come from ncclGetUniqueId");
}

TEST_CASE("ncclCommInitRank: two ranks on one device fail; several ranks from one thread in a group work", "[nccl]") {
  ncclUniqueId id;
  REQUIRE_NCCL(ncclGetUniqueId(&id));
  ncclResult_t results[2];
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);  // forgot cudaSetDevice(local_rank)
      ncclComm_t comm = nullptr;
      results[r] = ncclCommInitRank(&comm, 2, id, r);
      errors[r] = ncclGetLastError(nullptr);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    INFO(errors[r]);
    CHECK(results[r] == ncclInvalidUsage);
    CHECK(errors[r].find("ranks 0 and 1 both use cuda:0 (NCCL: \"Duplicate GPU detected\")") != std::string::npos);
  }

  REQUIRE_NCCL(ncclGetUniqueId(&id));
  ncclComm_t comms[2];
  REQUIRE_NCCL(ncclGroupStart());
  for (int r = 0; r < 2; ++r) {
    REQUIRE_CUDA(cudaSetDevice(r));
    REQUIRE_NCCL(ncclCommInitRank(&comms[r], 2, id, r));
  }
  REQUIRE_NCCL(ncclGroupEnd());
  DeviceBuffer x0(0, bytes_of(iota_floats(10, 0))), x1(1, bytes_of(iota_floats(10, 5)));
  REQUIRE_NCCL(ncclGroupStart());
  REQUIRE_NCCL(ncclAllReduce(x0.ptr, x0.ptr, 10, ncclFloat32, ncclMax, comms[0], nullptr));
  REQUIRE_NCCL(ncclAllReduce(x1.ptr, x1.ptr, 10, ncclFloat32, ncclMax, comms[1], nullptr));
  REQUIRE_NCCL(ncclGroupEnd());
  for (int r = 0; r < 2; ++r) REQUIRE_NCCL(ncclCommDestroy(comms[r]));  // waits for the queued work
  REQUIRE(x0.download() == bytes_of(iota_floats(10, 5)));
}

TEST_CASE("a peer that destroyed its communicator, or whose process ended, fails the waiting rank", "[nccl]") {
  {
    Ranks ranks(2);
    DeviceBuffer x(0, 400);
    REQUIRE_NCCL(ncclCommDestroy(ranks.comm(1)));
    ranks.forget(1);
    REQUIRE_NCCL(ncclAllReduce(x.ptr, x.ptr, 100, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
    const std::string why = failure_on(0, ranks.stream(0));
    INFO(why);
    CHECK(why.find("rank 1 (cuda:1, pid ") != std::string::npos);
    CHECK(why.find("destroyed its communicator while ncclAllReduce #0 on cuda:0 (rank 0 of 2) waited for it") !=
          std::string::npos);
    CHECK(async_error(ranks.comm(0)) == ncclInvalidUsage);
  }
  reset_devices(2);
  {
    ncclUniqueId id;
    REQUIRE_NCCL(ncclGetUniqueId(&id));
    std::string hex = id_hex(id);
    const std::string peer = runfile("nccl_peer_main");
    char* argv[] = {const_cast<char*>(peer.c_str()), hex.data(), nullptr};
    pid_t pid = 0;
    REQUIRE(::posix_spawn(&pid, peer.c_str(), nullptr, nullptr, argv, environ) == 0);
    REQUIRE_CUDA(cudaSetDevice(0));
    ncclComm_t comm;
    REQUIRE_NCCL(ncclCommInitRank(&comm, 2, id, 0));
    int status = -1;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(status == 0);  // joined, then exited without ncclCommDestroy
    DeviceBuffer x(0, 400);
    REQUIRE_NCCL(ncclAllReduce(x.ptr, x.ptr, 100, ncclFloat32, ncclSum, comm, nullptr));
    REQUIRE(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    const std::string why = ember::emu::failure_message();
    INFO(why);
    CHECK(why.find("rank 1 (cuda:1, pid " + std::to_string(pid) + ") exited without destroying its communicator") !=
          std::string::npos);
    CHECK(async_error(comm) == ncclRemoteError);
    REQUIRE_NCCL(ncclCommDestroy(comm));
  }
  reset_devices(2);
}

TEST_CASE("host code reading a buffer before its collective ran faults, naming the device", "[nccl]") {
  const std::string command = runfile("nccl_death_main") + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  std::array<char, 512> chunk;
  while (size_t got = std::fread(chunk.data(), 1, chunk.size(), pipe)) output.append(chunk.data(), got);
  const int status = ::pclose(pipe);
  INFO(output);
  CHECK(status != 0);
  CHECK(output.find("host code accessed device memory of cuda:0") != std::string::npos);
  CHECK(output.find("must not get here") == std::string::npos);
}
