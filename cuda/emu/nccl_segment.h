// The memory a communicator's ranks share, and how they wait on each other in it: one mapping per
// rank of either anonymous shared memory (ncclCommInitAll: one process) or a memfd that the first
// rank of a unique id hands to the others (ncclCommInitRank: threads or processes; see
// nccl_rendezvous.h). It holds only process-independent state (offsets, atomics, a futex word), so
// the same code serves both.
//
// Layout: a control block (the failure, the barrier, the futex word), a slot per rank (its device,
// its signature for the collective running now), per rank two staging buffers of `chunk_bytes`
// for collectives, and per ordered pair of ranks a channel of two chunks for send/recv. Large
// buffers move through these bounded areas chunk by chunk.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/emu/nccl.h"

namespace ember::emu::nccl {

class Rendezvous;

// What a rank passes to its next collective; every rank's must agree.
struct Signature {
  int32_t kind = 0, type = 0, op = 0, root = 0;
  uint64_t count = 0, seq = 0;
};

struct RankSlot {
  std::atomic<uint32_t> claimed, departed;
  int32_t device;
  int64_t pid;
  Signature signature;
};

// One chunk of a send, as its receiver finds it.
struct ChunkHeader {
  uint64_t message;  // the sender's message number on this channel
  uint64_t count;
  int32_t type;
  uint32_t bytes;
};

struct Channel {
  std::atomic<uint64_t> written, read;  // chunks written by the sender / taken by the receiver, ever
};

class Segment {
 public:
  // Every rank joined at once (ncclCommInitAll); `devices[r]` is rank r's.
  static std::shared_ptr<Segment> create_private(const std::vector<int>& devices);
  // Creates the segment of the id named `name`, or receives it from the rank that did, and claims
  // `rank`; joining is finished by wait_joined. Null on failure, with *result and *error set.
  static std::shared_ptr<Segment> attach(const std::string& name, int nranks, int rank, int device,
                                         ncclResult_t* result, std::string* error);
  // A fresh id (ncclGetUniqueId): 128 random bits name the segment.
  static bool new_id(ncclUniqueId* id);
  // The name under which the ranks of `id` meet; empty when `id` is not one of ours.
  static std::string name_for(const ncclUniqueId& id);

  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Waits until every rank has attached, then (in the rank that created the segment) stops
  // handing it out, and checks that no two ranks share a device.
  ncclResult_t wait_joined(std::string* error);

  int nranks() const { return nranks_; }
  size_t chunk_bytes() const { return chunk_bytes_; }
  uint64_t key() const;  // the same in every rank's mapping: tells communicators apart
  RankSlot& rank_slot(int rank);
  char* staging(int rank, int buffer);  // collectives: buffer 0 or 1 of `rank`
  Channel& channel(int from, int to);
  ChunkHeader& chunk_header(int from, int to, uint64_t chunk);
  char* chunk_data(int from, int to, uint64_t chunk);

  // Waiting: take a snapshot, check the state, and wait only if it did not change since.
  uint32_t snapshot() const;
  void wait(uint32_t snapshot) const;  // returns on a change (or spuriously)
  void notify();

  struct Control;  // the control block at the start (nccl_segment.cc)

  // ncclCommDestroy: the rank will never take part again.
  void depart(int rank);
  // Why `rank` can never arrive (it destroyed its communicator, or its process is gone), with the
  // result its waiting peers report; empty while it may still come.
  std::string absence(int rank, ncclResult_t* result);

  // A failure ends the communicator for every rank; the first reason is kept.
  void fail(ncclResult_t result, const std::string& reason);
  bool failed() const;
  ncclResult_t failure_result() const;
  std::string failure_reason() const;

  // The barrier of all ranks: arrive() returns a ticket that passed() accepts once all arrived.
  uint32_t arrive();
  bool passed(uint32_t ticket) const;

 private:
  Segment(char* base, size_t bytes);
  Control& control() const;
  void set_layout();
  char* channel_base(int from, int to);

  char* base_;
  size_t bytes_;
  std::unique_ptr<Rendezvous> rendezvous_;  // the creator's, until every rank has joined
  int nranks_ = 0;
  size_t chunk_bytes_ = 0, ranks_offset_ = 0, staging_offset_ = 0, channels_offset_ = 0, channel_stride_ = 0;
};

}  // namespace ember::emu::nccl
