// NCCL across processes under mpirun: each rank is a process with its own emulator (as many
// emulated devices as ranks, the rank's own one current), and the ranks share the communicator's
// memory that the first of them to join handed to the others, through the socket named from the id
// rank 0 made and MPI_Bcast shared. Collectives of several types and sizes (many staging chunks
// each) against host references, a send/recv ring, a mismatch and an abort seen by every process,
// and the socket gone once the ranks have joined.
#include <mpi.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cuda/emu/emu.h"
#include "tests/cuda/nccl_values.h"

using namespace ember::testing;

namespace {

int rank = 0, size = 1;

void check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

#define CHECK_NCCL(call) check((call) == ncclSuccess, std::string(#call) + ": " + ncclGetLastError(nullptr))
#define CHECK_CUDA(call) check((call) == cudaSuccess, #call)

// Whether /proc/net/unix lists the socket (its last field is the name, "@..." when abstract).
bool listed(const std::string& socket) {
  std::ifstream sockets("/proc/net/unix");
  for (std::string line; std::getline(sockets, line);)
    if (line.size() >= socket.size() && line.compare(line.size() - socket.size(), socket.size(), socket) == 0)
      return true;
  return false;
}

ncclComm_t join() {
  ncclUniqueId id;
  if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, size, id, rank));
  // Every rank has joined (and the one that served the memory has stopped): the socket is gone.
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string socket = ember::emu::nccl_rendezvous_socket(id);
  check(!socket.empty() && !listed(socket), socket + " is still listed in /proc/net/unix after every rank joined");
  return comm;
}

struct Buffer {
  void* ptr = nullptr;
  size_t bytes;
  explicit Buffer(size_t n) : bytes(n) { CHECK_CUDA(cudaMalloc(&ptr, std::max<size_t>(n, 1))); }
  explicit Buffer(const std::vector<char>& data) : Buffer(data.size()) {
    CHECK_CUDA(cudaMemcpy(ptr, data.data(), data.size(), cudaMemcpyHostToDevice));
  }
  ~Buffer() { cudaFree(ptr); }
  std::vector<char> read() const {
    std::vector<char> out(bytes);
    CHECK_CUDA(cudaMemcpy(out.data(), ptr, bytes, cudaMemcpyDeviceToHost));
    return out;
  }
};

// Every rank's input, computed by each rank alike from the rank's seed.
std::vector<std::vector<double>> inputs(ncclDataType_t type, size_t n, unsigned seed) {
  std::vector<std::vector<double>> all;
  for (int r = 0; r < size; ++r) all.push_back(random_values(type, n, seed * 7 + static_cast<unsigned>(r)));
  return all;
}

void expect_values(ncclDataType_t type, const Buffer& got, const std::vector<double>& expected, const char* what) {
  const long bad = first_mismatch(type, decode(type, got.read()), expected);
  check(bad < 0, std::string(what) + " of type " + std::to_string(type) + " differs from the reference at " +
                     std::to_string(bad));
}

void collectives(ncclComm_t comm, cudaStream_t stream) {
  const std::vector<size_t> counts = slow_mode() ? std::vector<size_t>{1, 20001} : std::vector<size_t>{1, 1001, 100003};
  for (ncclDataType_t type : {ncclFloat32, ncclFloat16, ncclBfloat16, ncclInt64, ncclFloat64, ncclUint8}) {
    for (size_t n : counts) {
      const size_t bytes = n * type_size(type);
      auto in = inputs(type, n, static_cast<unsigned>(n + type));
      Buffer x(encode(type, in[static_cast<size_t>(rank)])), sum(bytes), gathered(bytes * static_cast<size_t>(size));
      CHECK_NCCL(ncclAllReduce(x.ptr, sum.ptr, n, type, ncclSum, comm, stream));
      CHECK_NCCL(ncclAllGather(x.ptr, gathered.ptr, n, type, comm, stream));
      CHECK_NCCL(ncclBroadcast(x.ptr, x.ptr, n, type, size - 1, comm, stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      expect_values(type, sum, reference_reduce(type, ncclSum, in), "ncclAllReduce");
      std::vector<double> all;
      for (const auto& part : in) all.insert(all.end(), part.begin(), part.end());
      expect_values(type, gathered, all, "ncclAllGather");
      expect_values(type, x, in.back(), "ncclBroadcast");
      // Reduce-scatter in place: each rank's block of sendbuff becomes its result.
      auto blocks = inputs(type, n * static_cast<size_t>(size), static_cast<unsigned>(n + 100));
      Buffer whole(encode(type, blocks[static_cast<size_t>(rank)]));
      char* mine = static_cast<char*>(whole.ptr) + static_cast<size_t>(rank) * bytes;
      CHECK_NCCL(ncclReduceScatter(whole.ptr, mine, n, type, ncclMax, comm, stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      const std::vector<double> reduced = reference_reduce(type, ncclMax, blocks);
      const std::vector<double> got = decode(type, whole.read());
      const std::vector<double> my_block(got.begin() + static_cast<long>(rank * n),
                                         got.begin() + static_cast<long>((rank + 1) * n));
      const std::vector<double> expected(reduced.begin() + static_cast<long>(rank * n),
                                         reduced.begin() + static_cast<long>((rank + 1) * n));
      check(first_mismatch(type, my_block, expected) < 0, "ncclReduceScatter in place differs from the reference");
    }
  }
}

void ring(ncclComm_t comm, cudaStream_t stream) {
  const size_t n = 70001;  // several chunks
  auto in = inputs(ncclFloat32, n, 3);
  Buffer send(encode(ncclFloat32, in[static_cast<size_t>(rank)])), recv(n * 4);
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclSend(send.ptr, n, ncclFloat32, (rank + 1) % size, comm, stream));
  CHECK_NCCL(ncclRecv(recv.ptr, n, ncclFloat32, (rank + size - 1) % size, comm, stream));
  CHECK_NCCL(ncclGroupEnd());
  CHECK_CUDA(cudaStreamSynchronize(stream));
  expect_values(ncclFloat32, recv, in[static_cast<size_t>((rank + size - 1) % size)], "the ring's ncclRecv");
}

// A failed NCCL operation leaves a sticky error: the message, after which the device is reset.
std::string failure(cudaStream_t stream) {
  check(cudaStreamSynchronize(stream) == cudaErrorLaunchFailure, "the operation did not fail");
  std::string why = ember::emu::failure_message();
  cudaDeviceReset();
  cudaGetLastError();
  return why;
}

void mismatch(cudaStream_t stream) {
  ncclComm_t comm = join();
  Buffer x(4000);
  CHECK_NCCL(ncclAllReduce(x.ptr, x.ptr, rank == 1 ? 999 : 1000, ncclFloat32, ncclSum, comm, stream));
  const std::string why = failure(stream);
  check(
      why.find("ranks disagree on the count of collective #0 (ncclAllReduce): rank 0 passed 1000, rank 1 passed 999") !=
          std::string::npos,
      "mismatch message: " + why);
  ncclResult_t e;
  CHECK_NCCL(ncclCommGetAsyncError(comm, &e));
  check(e == ncclInvalidUsage, "ncclCommGetAsyncError after a mismatch");
  CHECK_NCCL(ncclCommDestroy(comm));
}

void abort_pending(cudaStream_t stream) {
  ncclComm_t comm = join();
  Buffer x(4000);
  const int aborter = size - 1;
  if (rank == 0) {
    CHECK_NCCL(ncclAllReduce(x.ptr, x.ptr, 1000, ncclFloat32, ncclSum, comm, stream));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    check(cudaStreamQuery(stream) == cudaErrorNotReady, "rank 0's all-reduce should wait for the others");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == aborter) {
    CHECK_NCCL(ncclCommAbort(comm));
  } else {
    if (rank == 0) {
      const std::string why = failure(stream);
      check(why.find("rank " + std::to_string(aborter) + " (cuda:" + std::to_string(aborter) + ", pid") !=
                    std::string::npos &&
                why.find("called ncclCommAbort") != std::string::npos,
            "abort message: " + why);
    }
    ncclResult_t e = ncclSuccess;
    // The abort reaches this process through the segment once the aborter has run, which on a
    // loaded machine may be seconds after the barrier: the bound only turns a lost abort into a
    // failure.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (e == ncclSuccess) {
      CHECK_NCCL(ncclCommGetAsyncError(comm, &e));
      if (e != ncclSuccess || std::chrono::steady_clock::now() > give_up) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    check(e == ncclRemoteError, "ncclCommGetAsyncError after a peer's abort: " + std::to_string(e));
    CHECK_NCCL(ncclCommDestroy(comm));
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const auto start = std::chrono::steady_clock::now();
  ember::emu::set_device_count(size);  // the node's GPUs, as every process sees them
  CHECK_CUDA(cudaSetDevice(rank));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  ncclComm_t comm = join();
  collectives(comm, stream);
  ring(comm, stream);
  CHECK_NCCL(ncclCommDestroy(comm));
  mismatch(stream);
  abort_pending(stream);
  CHECK_CUDA(cudaStreamDestroy(stream));
  MPI_Barrier(MPI_COMM_WORLD);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank %d of %d: all checks passed in %.2f s\n", rank, size, seconds);
#if defined(__SANITIZE_ADDRESS__)
  // Before MPI_Finalize unloads Open MPI's plugins, as Ember's MPI runtime does (comm/mpi/runtime.cc).
  __lsan_do_leak_check();
#endif
  MPI_Finalize();
  return 0;
}
