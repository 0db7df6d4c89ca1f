// NCCL through cuda/nccl.h with one rank: the same source against the emulated NCCL (CI) and the
// real one on a GPU (the _gpu target), so that the emulator's API and one-rank semantics are
// checked against NCCL itself. Several ranks need several GPUs: see nccl_collectives_test.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "cuda/nccl.h"

namespace {

#define REQUIRE_CUDA(call) REQUIRE((call) == cudaSuccess)
#define REQUIRE_NCCL(call)                                                              \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    INFO(#call << ": " << ncclGetErrorString(r_) << ": " << ncclGetLastError(nullptr)); \
    REQUIRE(r_ == ncclSuccess);                                                         \
  } while (0)

struct Floats {
  float* ptr = nullptr;
  size_t n;
  explicit Floats(const std::vector<float>& host) : n(host.size()) {
    REQUIRE_CUDA(cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(float)));
    REQUIRE_CUDA(cudaMemcpy(ptr, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~Floats() { cudaFree(ptr); }
  std::vector<float> read() const {
    std::vector<float> out(n);
    REQUIRE_CUDA(cudaMemcpy(out.data(), ptr, n * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }
};

std::vector<float> ramp(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i) * 0.5f;
  return v;
}

}  // namespace

TEST_CASE("one rank: every collective copies or averages its own data, send/recv to itself", "[nccl]") {
  REQUIRE_CUDA(cudaSetDevice(0));
  ncclUniqueId id;
  REQUIRE_NCCL(ncclGetUniqueId(&id));
  ncclComm_t comm;
  REQUIRE_NCCL(ncclCommInitRank(&comm, 1, id, 0));
  int count = 0, device = -1, rank = -1, version = 0;
  REQUIRE_NCCL(ncclCommCount(comm, &count));
  REQUIRE_NCCL(ncclCommCuDevice(comm, &device));
  REQUIRE_NCCL(ncclCommUserRank(comm, &rank));
  REQUIRE_NCCL(ncclGetVersion(&version));
  CHECK(count == 1);
  CHECK(device == 0);
  CHECK(rank == 0);
  CHECK(version >= NCCL_VERSION(2, 28, 0));
  cudaStream_t stream;
  REQUIRE_CUDA(cudaStreamCreate(&stream));

  const size_t n = 1001;
  const std::vector<float> x = ramp(n, -3);
  Floats send(x), recv(std::vector<float>(n, 0));
  REQUIRE_NCCL(ncclAllReduce(send.ptr, recv.ptr, n, ncclFloat32, ncclAvg, comm, stream));
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  CHECK(recv.read() == x);
  Floats again(std::vector<float>(n, 0));
  REQUIRE_NCCL(ncclBroadcast(send.ptr, again.ptr, n, ncclFloat32, 0, comm, stream));
  REQUIRE_NCCL(ncclReduce(send.ptr, recv.ptr, n, ncclFloat32, ncclMax, 0, comm, stream));
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  CHECK(again.read() == x);
  CHECK(recv.read() == x);
  Floats gathered(std::vector<float>(n, 0)), scattered(std::vector<float>(n, 0));
  REQUIRE_NCCL(ncclAllGather(send.ptr, gathered.ptr, n, ncclFloat32, comm, stream));
  REQUIRE_NCCL(ncclReduceScatter(send.ptr, scattered.ptr, n, ncclFloat32, ncclSum, comm, stream));
  REQUIRE_NCCL(ncclGroupStart());
  REQUIRE_NCCL(ncclSend(send.ptr, n, ncclFloat32, 0, comm, stream));
  REQUIRE_NCCL(ncclRecv(recv.ptr, n, ncclFloat32, 0, comm, stream));
  REQUIRE_NCCL(ncclGroupEnd());
  REQUIRE_CUDA(cudaStreamSynchronize(stream));
  CHECK(gathered.read() == x);
  CHECK(scattered.read() == x);
  CHECK(recv.read() == x);

  ncclResult_t async = ncclInternalError;
  REQUIRE_NCCL(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess);
  REQUIRE_NCCL(ncclCommDestroy(comm));
  REQUIRE_CUDA(cudaStreamDestroy(stream));
  CHECK(std::strlen(ncclGetErrorString(ncclInvalidArgument)) > 0);
}

TEST_CASE("ncclCommInitAll over one device, and a bad datatype refused at the call", "[nccl]") {
  ncclComm_t comm;
  const int devices[1] = {0};
  REQUIRE_NCCL(ncclCommInitAll(&comm, 1, devices));
  REQUIRE_CUDA(cudaSetDevice(0));
  Floats x(ramp(8, 1));
  CHECK(ncclAllReduce(x.ptr, x.ptr, 8, ncclNumTypes, ncclSum, comm, nullptr) == ncclInvalidArgument);
  REQUIRE_NCCL(ncclAllReduce(x.ptr, x.ptr, 8, ncclFloat32, ncclProd, comm, nullptr));
  REQUIRE_CUDA(cudaDeviceSynchronize());
  CHECK(x.read() == ramp(8, 1));
  REQUIRE_NCCL(ncclCommDestroy(comm));
}
