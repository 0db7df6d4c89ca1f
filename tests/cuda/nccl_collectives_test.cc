// NCCL's collectives on emulated devices of one process, 2 and 3 ranks: every collective, every
// reduction and datatype, odd sizes that cross many staging chunks (the target makes the chunk
// 1 KB), in place and out of place, each against a host reference; ranks made by
// ncclCommInitRank from a thread each; send/recv rings in groups.
#include <catch2/catch.hpp>

#include <memory>
#include <thread>

#include "tests/cuda/nccl_ranks.h"
#include "tests/cuda/nccl_values.h"

using namespace ember::testing;

namespace {

using Values = std::vector<std::vector<double>>;

std::vector<size_t> counts() { return slow_mode() ? std::vector<size_t>{1, 301} : std::vector<size_t>{1, 7, 1001}; }

std::vector<ncclDataType_t> types() {
  if (slow_mode()) return {ncclInt8, ncclUint64, ncclFloat16, ncclFloat32, ncclBfloat16};
  return all_types();
}

Values make_inputs(ncclDataType_t type, int nranks, size_t n, unsigned seed) {
  Values inputs;
  for (int r = 0; r < nranks; ++r) inputs.push_back(random_values(type, n, seed * 31 + static_cast<unsigned>(r)));
  return inputs;
}

std::vector<double> slice(const std::vector<double>& v, size_t begin, size_t n) {
  return std::vector<double>(v.begin() + static_cast<long>(begin), v.begin() + static_cast<long>(begin + n));
}

std::vector<double> concatenate(const Values& parts) {
  std::vector<double> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

void require_close(ncclDataType_t type, const std::vector<double>& got, const std::vector<double>& expected) {
  const long bad = first_mismatch(type, got, expected);
  INFO("first mismatch at " << bad << ": got " << (bad >= 0 && static_cast<size_t>(bad) < got.size() ? got[bad] : 0)
                            << ", expected "
                            << (bad >= 0 && static_cast<size_t>(bad) < expected.size() ? expected[bad] : 0));
  REQUIRE(bad == -1);
}

template <class Call>
void in_group(const Ranks& ranks, Call call) {
  REQUIRE_NCCL(ncclGroupStart());
  for (int r = 0; r < ranks.size(); ++r) REQUIRE_NCCL(call(r));
  REQUIRE_NCCL(ncclGroupEnd());
  ranks.synchronize();
}

using Buffers = std::vector<std::unique_ptr<DeviceBuffer>>;

void check_all_reduce(const Ranks& ranks, ncclDataType_t type, ncclRedOp_t op, size_t n, bool in_place) {
  const int R = ranks.size();
  const Values inputs = make_inputs(type, R, n, static_cast<unsigned>(n + op));
  Buffers send, recv;
  for (int r = 0; r < R; ++r) {
    send.push_back(std::make_unique<DeviceBuffer>(r, encode(type, inputs[r])));
    recv.push_back(in_place ? nullptr : std::make_unique<DeviceBuffer>(r, n * type_size(type)));
  }
  auto out = [&](int r) { return in_place ? send[r].get() : recv[r].get(); };
  in_group(ranks, [&](int r) {
    return ncclAllReduce(send[r]->ptr, out(r)->ptr, n, type, op, ranks.comm(r), ranks.stream(r));
  });
  const std::vector<char> first = out(0)->download();
  require_close(type, decode(type, first), reference_reduce(type, op, inputs));
  for (int r = 1; r < R; ++r) REQUIRE(out(r)->download() == first);  // every rank gets the same bits
}

void check_broadcast(const Ranks& ranks, ncclDataType_t type, size_t n, int root) {
  const int R = ranks.size();
  const Values inputs = make_inputs(type, R, n, static_cast<unsigned>(n + 7));
  Buffers send, recv;
  for (int r = 0; r < R; ++r) {
    send.push_back(std::make_unique<DeviceBuffer>(r, encode(type, inputs[r])));
    recv.push_back(std::make_unique<DeviceBuffer>(r, n * type_size(type)));
  }
  // Only the root's sendbuff is read.
  in_group(ranks, [&](int r) {
    return ncclBroadcast(r == root ? send[r]->ptr : nullptr, recv[r]->ptr, n, type, root, ranks.comm(r),
                         ranks.stream(r));
  });
  for (int r = 0; r < R; ++r) require_close(type, decode(type, recv[r]->download()), inputs[root]);
}

void check_reduce(const Ranks& ranks, ncclDataType_t type, ncclRedOp_t op, size_t n, int root) {
  const int R = ranks.size();
  const Values inputs = make_inputs(type, R, n, static_cast<unsigned>(n + 11));
  Buffers send;
  for (int r = 0; r < R; ++r) send.push_back(std::make_unique<DeviceBuffer>(r, encode(type, inputs[r])));
  DeviceBuffer recv(root, n * type_size(type));
  in_group(ranks, [&](int r) {
    return ncclReduce(send[r]->ptr, r == root ? recv.ptr : nullptr, n, type, op, root, ranks.comm(r), ranks.stream(r));
  });
  require_close(type, decode(type, recv.download()), reference_reduce(type, op, inputs));
}

void check_all_gather(const Ranks& ranks, ncclDataType_t type, size_t n, bool in_place) {
  const int R = ranks.size();
  const size_t size = type_size(type);
  const Values inputs = make_inputs(type, R, n, static_cast<unsigned>(n + 13));
  Buffers send, recv;
  for (int r = 0; r < R; ++r) {
    recv.push_back(std::make_unique<DeviceBuffer>(r, R * n * size));
    if (in_place) {  // the rank's own part of recvbuff is its sendbuff
      std::vector<char> whole(R * n * size, 0);
      const std::vector<char> mine = encode(type, inputs[r]);
      std::copy(mine.begin(), mine.end(), whole.begin() + static_cast<long>(r * n * size));
      recv[r]->upload(whole);
    } else {
      send.push_back(std::make_unique<DeviceBuffer>(r, encode(type, inputs[r])));
    }
  }
  in_group(ranks, [&](int r) {
    const void* from = in_place ? recv[r]->at(r * n * size) : send[r]->ptr;
    return ncclAllGather(from, recv[r]->ptr, n, type, ranks.comm(r), ranks.stream(r));
  });
  for (int r = 0; r < R; ++r) require_close(type, decode(type, recv[r]->download()), concatenate(inputs));
}

void check_reduce_scatter(const Ranks& ranks, ncclDataType_t type, ncclRedOp_t op, size_t n, bool in_place) {
  const int R = ranks.size();
  const size_t size = type_size(type);
  const Values inputs = make_inputs(type, R, R * n, static_cast<unsigned>(n + 17 + op));
  const std::vector<double> reduced = reference_reduce(type, op, inputs);
  Buffers send, recv;
  for (int r = 0; r < R; ++r) {
    send.push_back(std::make_unique<DeviceBuffer>(r, encode(type, inputs[r])));
    recv.push_back(in_place ? nullptr : std::make_unique<DeviceBuffer>(r, n * size));
  }
  auto out = [&](int r) { return in_place ? send[r]->at(r * n * size) : static_cast<char*>(recv[r]->ptr); };
  in_group(ranks,
           [&](int r) { return ncclReduceScatter(send[r]->ptr, out(r), n, type, op, ranks.comm(r), ranks.stream(r)); });
  for (int r = 0; r < R; ++r) {
    std::vector<double> got = decode(type, in_place ? send[r]->download() : recv[r]->download());
    if (in_place) got = slice(got, r * n, n);
    require_close(type, got, slice(reduced, r * n, n));
  }
}

const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

}  // namespace

TEST_CASE("all-reduce: every reduction and datatype, odd sizes, 2 and 3 ranks", "[nccl]") {
  for (int nranks : {2, 3}) {
    Ranks ranks(nranks);
    for (ncclDataType_t type : types())
      for (size_t n : counts())
        for (ncclRedOp_t op : kOps) {
          INFO(nranks << " ranks, " << type_size(type) << "-byte type " << type << ", op " << op << ", count " << n);
          check_all_reduce(ranks, type, op, n, false);
        }
  }
}

TEST_CASE("broadcast, reduce, all-gather and reduce-scatter against host references", "[nccl]") {
  for (int nranks : {2, 3}) {
    Ranks ranks(nranks);
    for (ncclDataType_t type : types())
      for (size_t n : counts()) {
        INFO(nranks << " ranks, type " << type << ", count " << n);
        check_broadcast(ranks, type, n, static_cast<int>(n % nranks));
        check_reduce(ranks, type, n % 2 ? ncclSum : ncclMax, n, nranks - 1);
        check_all_gather(ranks, type, n, false);
        check_reduce_scatter(ranks, type, n % 2 ? ncclSum : ncclMin, n, false);
        check_reduce_scatter(ranks, type, ncclAvg, n, false);
      }
  }
}

TEST_CASE("in-place all-reduce, all-gather and reduce-scatter", "[nccl]") {
  for (int nranks : {2, 3}) {
    Ranks ranks(nranks);
    for (ncclDataType_t type : {ncclFloat32, ncclBfloat16, ncclInt64}) {
      INFO(nranks << " ranks, type " << type);
      check_all_reduce(ranks, type, ncclSum, 1001, true);
      check_all_gather(ranks, type, 1001, true);
      check_reduce_scatter(ranks, type, ncclSum, 1001, true);
    }
  }
}

TEST_CASE("empty collectives complete without meeting the other ranks", "[nccl]") {
  Ranks ranks(2);
  // Rank 1 never calls: NCCL drops an empty collective, so rank 0 does not wait for it.
  REQUIRE_NCCL(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
  REQUIRE_CUDA(cudaStreamSynchronize(ranks.stream(0)));
  check_all_reduce(ranks, ncclFloat32, ncclSum, 5, false);  // and numbering stays in step
}

TEST_CASE("ncclCommInitRank from one thread per rank, and the communicator queries", "[nccl]") {
  const int nranks = 3;
  ncclUniqueId id;
  REQUIRE_NCCL(ncclGetUniqueId(&id));
  std::vector<std::vector<double>> results(nranks);
  std::vector<std::string> errors(nranks);
  std::vector<std::thread> threads;
  const size_t n = 777;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      auto expect = [&](bool ok, const std::string& what) {
        if (!ok && errors[r].empty()) errors[r] = what + ": " + ncclGetLastError(nullptr);
        return ok;
      };
      cudaSetDevice(r);
      ncclComm_t comm;
      if (!expect(ncclCommInitRank(&comm, nranks, id, r) == ncclSuccess, "ncclCommInitRank")) return;
      int count = 0, device = -1, rank = -1;
      ncclCommCount(comm, &count);
      ncclCommCuDevice(comm, &device);
      ncclCommUserRank(comm, &rank);
      expect(count == nranks && device == r && rank == r, "queries");
      std::vector<float> mine(n);
      for (size_t i = 0; i < n; ++i) mine[i] = static_cast<float>(r * 1000 + i);
      float* buffer = nullptr;
      cudaMalloc(reinterpret_cast<void**>(&buffer), n * sizeof(float));
      cudaMemcpy(buffer, mine.data(), n * sizeof(float), cudaMemcpyHostToDevice);
      cudaStream_t stream;
      cudaStreamCreate(&stream);
      expect(ncclAllReduce(buffer, buffer, n, ncclFloat32, ncclSum, comm, stream) == ncclSuccess, "ncclAllReduce");
      expect(cudaStreamSynchronize(stream) == cudaSuccess, "cudaStreamSynchronize");
      cudaMemcpy(mine.data(), buffer, n * sizeof(float), cudaMemcpyDeviceToHost);
      results[r].assign(mine.begin(), mine.end());
      expect(ncclCommDestroy(comm) == ncclSuccess, "ncclCommDestroy");
      cudaStreamDestroy(stream);
      cudaFree(buffer);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
    for (size_t i = 0; i < n; ++i) REQUIRE(results[r][i] == static_cast<double>(3 * i + 3000));
  }
}

TEST_CASE("a ring of sends and receives in one group does not deadlock", "[nccl]") {
  for (int nranks : {2, 3}) {
    Ranks ranks(nranks);
    const size_t n = slow_mode() ? 300 : 2500;  // a few chunks per message
    const Values inputs = make_inputs(ncclFloat64, nranks, n, 5);
    Buffers send, recv;
    for (int r = 0; r < nranks; ++r) {
      send.push_back(std::make_unique<DeviceBuffer>(r, encode(ncclFloat64, inputs[r])));
      recv.push_back(std::make_unique<DeviceBuffer>(r, n * 8));
    }
    // One thread drives every rank, so one group holds them all (NCCL's rule for that case).
    REQUIRE_NCCL(ncclGroupStart());
    for (int r = 0; r < nranks; ++r) {
      REQUIRE_NCCL(ncclSend(send[r]->ptr, n, ncclFloat64, (r + 1) % nranks, ranks.comm(r), ranks.stream(r)));
      REQUIRE_NCCL(ncclRecv(recv[r]->ptr, n, ncclFloat64, (r + nranks - 1) % nranks, ranks.comm(r), ranks.stream(r)));
    }
    REQUIRE_NCCL(ncclGroupEnd());
    ranks.synchronize();
    for (int r = 0; r < nranks; ++r)
      require_close(ncclFloat64, decode(ncclFloat64, recv[r]->download()), inputs[(r + nranks - 1) % nranks]);
  }
}

TEST_CASE("send/recv to itself, several messages to one peer in order, and from a thread per rank", "[nccl]") {
  Ranks ranks(2);
  const Values inputs = make_inputs(ncclInt32, 2, 600, 9);
  DeviceBuffer a(0, encode(ncclInt32, inputs[0])), b(0, encode(ncclInt32, inputs[1]));
  DeviceBuffer self(0, 600 * 4), first(1, 300 * 4), second(1, 300 * 4);
  REQUIRE_NCCL(ncclGroupStart());
  REQUIRE_NCCL(ncclSend(a.ptr, 600, ncclInt32, 0, ranks.comm(0), ranks.stream(0)));
  REQUIRE_NCCL(ncclRecv(self.ptr, 600, ncclInt32, 0, ranks.comm(0), ranks.stream(0)));
  REQUIRE_NCCL(ncclSend(b.ptr, 300, ncclInt32, 1, ranks.comm(0), ranks.stream(0)));
  REQUIRE_NCCL(ncclSend(b.at(300 * 4), 300, ncclInt32, 1, ranks.comm(0), ranks.stream(0)));
  REQUIRE_NCCL(ncclRecv(first.ptr, 300, ncclInt32, 0, ranks.comm(1), ranks.stream(1)));
  REQUIRE_NCCL(ncclRecv(second.ptr, 300, ncclInt32, 0, ranks.comm(1), ranks.stream(1)));
  REQUIRE_NCCL(ncclGroupEnd());
  ranks.synchronize();
  require_close(ncclInt32, decode(ncclInt32, self.download()), inputs[0]);
  require_close(ncclInt32, decode(ncclInt32, first.download()), slice(inputs[1], 0, 300));
  require_close(ncclInt32, decode(ncclInt32, second.download()), slice(inputs[1], 300, 300));

  // A thread per rank: ungrouped calls, a send on one rank meeting a receive on the other.
  DeviceBuffer got(1, 600 * 4);
  std::thread receiver([&] { ncclRecv(got.ptr, 600, ncclInt32, 0, ranks.comm(1), ranks.stream(1)); });
  REQUIRE_NCCL(ncclSend(a.ptr, 600, ncclInt32, 1, ranks.comm(0), ranks.stream(0)));
  receiver.join();
  ranks.synchronize();
  require_close(ncclInt32, decode(ncclInt32, got.download()), inputs[0]);
}
