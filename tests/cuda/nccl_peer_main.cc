// A peer process for nccl_failures_test: joins the communicator of the id given in hex as rank 1
// on its own emulated cuda:1, then exits without destroying it, as a crashed rank would.
#include <cstdio>
#include <cstring>
#include <string>

#include "cuda/emu/emu.h"
#include "cuda/nccl.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::strlen(argv[1]) != 2 * sizeof(ncclUniqueId)) return 2;
  ncclUniqueId id;
  for (size_t i = 0; i < sizeof(id); ++i) id.internal[i] = static_cast<char>(std::stoi(std::string(argv[1] + 2 * i, 2), nullptr, 16));
  ember::emu::set_device_count(2);
  cudaSetDevice(1);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, id, 1) != ncclSuccess) {
    std::fprintf(stderr, "%s\n", ncclGetLastError(nullptr));
    return 3;
  }
  return 0;
}
