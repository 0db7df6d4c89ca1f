// The subset of NCCL's C API that Ember calls, on emulated devices, with NCCL's names, types,
// values and signatures, so that code written against it builds unchanged against the real
// <nccl.h> (include cuda/nccl.h, which picks one).
//
//   ncclComm_t comms[2];
//   ncclCommInitAll(comms, 2, nullptr);                  // ranks 0 and 1 on cuda:0 and cuda:1
//   ncclGroupStart();                                     // one thread drives both ranks
//   for (int r = 0; r < 2; ++r) ncclAllReduce(x[r], x[r], n, ncclFloat32, ncclSum, comms[r], streams[r]);
//   ncclGroupEnd();                                       // returns at once; the streams run it
//   cudaStreamSynchronize(streams[0]);                    // a failed collective is a sticky error
//
// Across processes (each with its own emulator): ncclGetUniqueId on one rank, shared by the
// caller (MPI_Bcast), then ncclCommInitRank(&comm, nranks, id, rank) after cudaSetDevice; the ranks
// share unnamed memory, handed out over an abstract unix socket named from the id while they join.
// See docs/ARCHITECTURE.md for what the emulator checks that NCCL does not (mismatched calls,
// buffers, a thread driving several ranks).
#pragma once

#include <climits>
#include <cstddef>
#include <string>

#include "cuda/emu/cuda_runtime.h"

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 0
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22800
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

extern "C" {

typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

// NCCL sizes ncclRedOp_t by this enum, so that the largest value keeps its ABI.
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

// The float8 types exist for exact values; the emulator refuses them (ncclInvalidArgument).
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
// Blocks until all `nranks` ranks have called it (inside a group: until ncclGroupEnd). The rank
// uses the calling thread's current device.
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
// Rank i on devlist[i] (devices 0..ndev-1 when devlist is null).
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
// Waits for the communicator's queued operations, then frees it.
ncclResult_t ncclCommDestroy(ncclComm_t comm);
// Frees the communicator at once; its queued operations and its peers' waiting ones fail.
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

const char* ncclGetErrorString(ncclResult_t result);
// The last error's message: the communicator's asynchronous failure if it has one, else the
// calling thread's last failed call (comm may be null).
const char* ncclGetLastError(ncclComm_t comm);

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
// A send completes only once its receiver has taken every byte (NCCL's contract, which buffering
// hides on GPUs for small messages): send/recv pairs that must overlap go in one group.
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);

ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();

}  // extern "C"

namespace ember::emu {

// The emulator's own: the abstract unix socket through which the ranks of `id` join, as
// /proc/net/unix lists it ("@ember_nccl_..."), for tests that check nothing is left behind; empty
// for an id that ncclGetUniqueId did not make.
std::string nccl_rendezvous_socket(const ncclUniqueId& id);

}  // namespace ember::emu
