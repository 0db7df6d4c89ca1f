// A peer process for the NCCL tests: joins the communicator of the id given in hex as RANK (default
// 1) of 2 on its own emulated cuda:RANK. Then either exits without destroying it, as a crashed
// rank would (nccl_failures_test), or, with `loop`, runs all-reduces until it is killed, saying on
// stdout when it starts joining, has joined and has finished its first all-reduce
// (nccl_cleanup_test).
//   nccl_peer_main ID_HEX [RANK [loop]]
#include <cstdio>
#include <cstring>
#include <string>

#include "cuda/emu/emu.h"
#include "cuda/nccl.h"

namespace {

void say(const char* line) {
  std::printf("%s\n", line);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4 || std::strlen(argv[1]) != 2 * sizeof(ncclUniqueId)) return 2;
  ncclUniqueId id;
  for (size_t i = 0; i < sizeof(id); ++i)
    id.internal[i] = static_cast<char>(std::stoi(std::string(argv[1] + 2 * i, 2), nullptr, 16));
  const int rank = argc >= 3 ? std::stoi(argv[2]) : 1;
  const bool loop = argc == 4 && std::string(argv[3]) == "loop";
  ember::emu::set_device_count(2);
  cudaSetDevice(rank);
  ncclComm_t comm;
  say("joining");
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "%s\n", ncclGetLastError(nullptr));
    return 3;
  }
  say("joined");
  if (!loop) return 0;
  const size_t n = 1 << 16;  // many staging chunks: most of the time is spent inside the collective
  float* x = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&x), n * sizeof(float));
  cudaMemset(x, 0, n * sizeof(float));
  for (bool first = true;; first = false) {
    if (ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
      std::fprintf(stderr, "all-reduce failed: %s\n", ncclGetLastError(comm));
      return 4;
    }
    if (first) say("collective");
  }
}
