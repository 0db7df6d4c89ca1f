// The collectives and send/recv as step functions that never block, driven together by one loop
// that sleeps on the segment only when none of them can move.
#include "cuda/emu/nccl_ops.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <utility>

#include "cuda/emu/device.h"
#include "cuda/emu/memory.h"
#include "cuda/emu/nccl_reduce.h"

namespace ember::emu::nccl {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::AllReduce:
      return "ncclAllReduce";
    case Kind::Broadcast:
      return "ncclBroadcast";
    case Kind::Reduce:
      return "ncclReduce";
    case Kind::AllGather:
      return "ncclAllGather";
    case Kind::ReduceScatter:
      return "ncclReduceScatter";
    case Kind::Send:
      return "ncclSend";
    case Kind::Recv:
      return "ncclRecv";
  }
  return "?";
}

bool is_collective(Kind kind) { return kind != Kind::Send && kind != Kind::Recv; }

namespace {

constexpr auto kPeerCheckInterval = std::chrono::milliseconds(100);

bool reduces(Kind kind) { return kind == Kind::AllReduce || kind == Kind::Reduce || kind == Kind::ReduceScatter; }
bool rooted(Kind kind) { return kind == Kind::Broadcast || kind == Kind::Reduce; }

const char* count_name(Kind kind) {
  return kind == Kind::AllGather ? "sendcount" : kind == Kind::ReduceScatter ? "recvcount" : "count";
}

std::string describe(const Call& c, const RankPlace& p) {
  std::string what = std::string(kind_name(c.kind)) + " #" + std::to_string(c.seq);
  if (c.kind == Kind::Send) what += " to rank " + std::to_string(c.root);
  if (c.kind == Kind::Recv) what += " from rank " + std::to_string(c.root);
  return what + " on cuda:" + std::to_string(p.device) + " (rank " + std::to_string(p.rank) + " of " +
         std::to_string(p.nranks) + ")";
}

class Task {
 public:
  Task(Segment& segment, const RankPlace& place, const Call& call)
      : segment_(segment),
        place_(place),
        call_(call),
        element_(element_size(call.type)),
        send_view_(static_cast<const char*>(host_view(call.send))),
        recv_view_(static_cast<char*>(host_view(call.recv))) {}
  virtual ~Task() = default;
  // Moves as far as it can without waiting; true when anything changed.
  virtual bool step() = 0;
  bool done() const { return done_; }
  // Why it failed, in words that hold for every rank (the segment's reason); empty while healthy.
  const std::string& failure() const { return failure_; }
  std::string where() const { return describe(call_, place_); }
  // The ranks it may be waiting for.
  std::vector<int> peers() const {
    std::vector<int> ranks;
    for (int r = 0; r < place_.nranks; ++r)
      if (r != place_.rank && (is_collective(call_.kind) || r == call_.root)) ranks.push_back(r);
    return ranks;
  }

 protected:
  // Freed (or reallocated smaller) between the call and now: the kernel would read garbage.
  bool buffers_live() {
    DeviceHeap& heap = *device_at(place_.device)->heap;
    auto check = [&](const void* ptr, size_t bytes, const char* name) {
      if (bytes == 0 || heap.holds_range(ptr, bytes)) return true;
      failure_ = "rank " + std::to_string(place_.rank) + "'s " + name + " (" + std::to_string(bytes) +
                 " bytes) is no longer a live allocation of cuda:" + std::to_string(place_.device) + " when " +
                 describe(call_, place_) + " runs: freed before the operation ran";
      return false;
    };
    return check(call_.send, send_bytes(call_, place_.rank, place_.nranks), "sendbuff") &&
           check(call_.recv, recv_bytes(call_, place_.rank, place_.nranks), "recvbuff");
  }

  Segment& segment_;
  RankPlace place_;
  Call call_;
  size_t element_;
  // The buffers as this process reaches them (device memory through its heap's alias).
  const char* send_view_;
  char* recv_view_;
  bool done_ = false;
  std::string failure_;
};

class CollectiveTask : public Task {
 public:
  CollectiveTask(Segment& segment, const RankPlace& place, const Call& call) : Task(segment, place, call) {
    const size_t parts = call.kind == Kind::ReduceScatter ? static_cast<size_t>(place.nranks) : 1;
    per_chunk_ = segment.chunk_bytes() / (element_ * parts);
    chunks_ = (call.count + per_chunk_ - 1) / per_chunk_;
  }

  bool step() override {
    bool progressed = false;
    while (!done_ && failure_.empty()) {
      switch (state_) {
        case State::Agree: {
          if (!buffers_live()) return true;
          Signature& mine = segment_.rank_slot(place_.rank).signature;
          mine.kind = static_cast<int32_t>(call_.kind);
          mine.type = call_.type;
          mine.op = call_.op;
          mine.root = call_.root;
          mine.count = call_.count;
          mine.seq = call_.seq;
          ticket_ = segment_.arrive();
          state_ = State::AgreeWait;
          break;
        }
        case State::AgreeWait:
          if (!segment_.passed(ticket_)) return progressed;
          failure_ = disagreement();
          state_ = State::Stage;
          break;
        case State::Stage:
          stage_in();
          ticket_ = segment_.arrive();
          state_ = State::StageWait;
          break;
        case State::StageWait:
          if (!segment_.passed(ticket_)) return progressed;
          stage_out();
          done_ = ++chunk_ == chunks_;
          state_ = State::Stage;
          break;
      }
      progressed = true;
    }
    return progressed;
  }

 private:
  enum class State { Agree, AgreeWait, Stage, StageWait };

  // Every rank reads the same signatures, so every rank finds the same disagreement.
  std::string disagreement() {
    const Signature& first = segment_.rank_slot(0).signature;
    const std::string number = "collective #" + std::to_string(first.seq);
    for (int q = 1; q < place_.nranks; ++q) {
      const Signature& other = segment_.rank_slot(q).signature;
      const std::string ranks = ": rank 0 passed ", and_rank = ", rank " + std::to_string(q) + " passed ";
      const Kind kind = static_cast<Kind>(first.kind);
      const std::string about = std::string(" of ") + number + " (" + kind_name(kind) + ")";
      if (other.kind != first.kind)
        return "ranks called different collectives as " + number + ": rank 0 called " + kind_name(kind) + ", rank " +
               std::to_string(q) + " called " + kind_name(static_cast<Kind>(other.kind));
      if (other.type != first.type)
        return "ranks disagree on the datatype" + about + ranks + type_name(static_cast<ncclDataType_t>(first.type)) +
               and_rank + type_name(static_cast<ncclDataType_t>(other.type));
      if (other.count != first.count)
        return std::string("ranks disagree on the ") + count_name(kind) + about + ranks + std::to_string(first.count) +
               and_rank + std::to_string(other.count);
      if (reduces(kind) && other.op != first.op)
        return "ranks disagree on the reduction" + about + ranks + op_name(static_cast<ncclRedOp_t>(first.op)) +
               and_rank + op_name(static_cast<ncclRedOp_t>(other.op));
      if (rooted(kind) && other.root != first.root)
        return "ranks disagree on the root" + about + ranks + std::to_string(first.root) + and_rank +
               std::to_string(other.root);
    }
    return "";
  }

  size_t offset() const { return chunk_ * per_chunk_; }
  size_t length() const { return std::min(per_chunk_, call_.count - offset()); }
  int buffer() const { return static_cast<int>(chunk_ % 2); }
  const char* send_at(size_t element) const { return send_view_ + element * element_; }
  char* recv_at(size_t element) const { return recv_view_ + element * element_; }

  // Double-buffered: a rank writes chunk k + 1 while others may still read chunk k, but never
  // before all of them have finished chunk k - 1 (they passed the barrier of chunk k).
  void stage_in() {
    const int rank = place_.rank, b = buffer();
    const size_t bytes = length() * element_;
    switch (call_.kind) {
      case Kind::Broadcast:
        if (rank != call_.root) return;
        [[fallthrough]];
      case Kind::AllReduce:
      case Kind::Reduce:
      case Kind::AllGather: {
        std::memcpy(segment_.staging(rank, b), send_at(offset()), bytes);
        return;
      }
      case Kind::ReduceScatter: {
        for (int d = 0; d < place_.nranks; ++d)
          std::memcpy(segment_.staging(rank, b) + static_cast<size_t>(d) * per_chunk_ * element_,
                      send_at(static_cast<size_t>(d) * call_.count + offset()), bytes);
        return;
      }
      default:
        return;
    }
  }

  void stage_out() {
    const int rank = place_.rank, b = buffer();
    const size_t n = length(), bytes = n * element_;
    switch (call_.kind) {
      case Kind::Reduce:
        if (rank != call_.root) return;
        [[fallthrough]];
      case Kind::AllReduce:
      case Kind::ReduceScatter: {
        const size_t part = call_.kind == Kind::ReduceScatter ? static_cast<size_t>(rank) * per_chunk_ * element_ : 0;
        inputs_.clear();
        for (int q = 0; q < place_.nranks; ++q) inputs_.push_back(segment_.staging(q, b) + part);
        result_.resize(bytes);
        reduce(call_.type, call_.op, place_.nranks, inputs_.data(), result_.data(), n);
        std::memcpy(recv_at(offset()), result_.data(), bytes);
        return;
      }
      case Kind::Broadcast: {
        std::memcpy(recv_at(offset()), segment_.staging(call_.root, b), bytes);
        return;
      }
      case Kind::AllGather: {
        for (int q = 0; q < place_.nranks; ++q)
          std::memcpy(recv_at(static_cast<size_t>(q) * call_.count + offset()), segment_.staging(q, b), bytes);
        return;
      }
      default:
        return;
    }
  }

  State state_ = State::Agree;
  uint32_t ticket_ = 0;
  size_t per_chunk_ = 1, chunks_ = 0, chunk_ = 0;
  std::vector<const void*> inputs_;
  std::vector<char> result_;  // heap storage: aligned for every element type
};

// A message moves through its channel's two chunk slots; `written` and `read` count chunks over
// the channel's life, so each side finds where a message starts from where the last one ended.
class PointToPointTask : public Task {
 public:
  PointToPointTask(Segment& segment, const RankPlace& place, const Call& call)
      : Task(segment, place, call),
        sending_(call.kind == Kind::Send),
        channel_(sending_ ? segment.channel(place.rank, call.root) : segment.channel(call.root, place.rank)),
        bytes_(call.count * element_) {
    chunks_ = std::max<size_t>(1, (bytes_ + segment.chunk_bytes() - 1) / segment.chunk_bytes());
  }

  bool step() override {
    if (!started_) {
      if (!buffers_live()) return true;
      base_ =
          sending_ ? channel_.written.load(std::memory_order_acquire) : channel_.read.load(std::memory_order_acquire);
      started_ = true;
    }
    return sending_ ? send_step() : receive_step();
  }

 private:
  int from() const { return sending_ ? place_.rank : call_.root; }
  int to() const { return sending_ ? call_.root : place_.rank; }
  size_t chunk_offset() const { return next_ * segment_.chunk_bytes(); }
  size_t chunk_length() const { return std::min(segment_.chunk_bytes(), bytes_ - std::min(bytes_, chunk_offset())); }

  bool send_step() {
    bool progressed = false;
    while (next_ < chunks_ &&
           channel_.written.load(std::memory_order_relaxed) - channel_.read.load(std::memory_order_acquire) < 2) {
      const uint64_t index = base_ + next_;
      ChunkHeader& header = segment_.chunk_header(from(), to(), index);
      header = {call_.seq, call_.count, call_.type, static_cast<uint32_t>(chunk_length())};
      if (chunk_length() > 0) {
        std::memcpy(segment_.chunk_data(from(), to(), index), send_view_ + chunk_offset(), chunk_length());
      }
      channel_.written.store(index + 1, std::memory_order_release);
      segment_.notify();
      ++next_;
      progressed = true;
    }
    // Done only once the receiver has taken everything: NCCL's send is a rendezvous.
    if (next_ == chunks_ && channel_.read.load(std::memory_order_acquire) >= base_ + chunks_) done_ = progressed = true;
    return progressed;
  }

  bool receive_step() {
    bool progressed = false;
    while (next_ < chunks_ && channel_.written.load(std::memory_order_acquire) > base_ + next_) {
      const uint64_t index = base_ + next_;
      const ChunkHeader& header = segment_.chunk_header(from(), to(), index);
      if (next_ == 0 && (header.count != call_.count || header.type != call_.type)) {
        failure_ = "send/recv mismatch: rank " + std::to_string(from()) + " sends " + std::to_string(header.count) +
                   " x " + type_name(static_cast<ncclDataType_t>(header.type)) + " to rank " + std::to_string(to()) +
                   " (its message #" + std::to_string(header.message) + " to it), which receives " +
                   std::to_string(call_.count) + " x " + type_name(call_.type);
        return true;
      }
      if (header.message != call_.seq || header.bytes != chunk_length()) {
        failure_ = "send/recv out of step between rank " + std::to_string(from()) + " and rank " +
                   std::to_string(to()) + ": expected message #" + std::to_string(call_.seq) + ", found #" +
                   std::to_string(header.message);
        return true;
      }
      if (chunk_length() > 0) {
        std::memcpy(recv_view_ + chunk_offset(), segment_.chunk_data(from(), to(), index), chunk_length());
      }
      channel_.read.store(index + 1, std::memory_order_release);
      segment_.notify();
      ++next_;
      progressed = true;
    }
    if (next_ == chunks_) done_ = progressed = true;
    return progressed;
  }

  bool sending_;
  Channel& channel_;
  size_t bytes_, chunks_ = 1, next_ = 0;
  uint64_t base_ = 0;
  bool started_ = false;
};

}  // namespace

size_t send_bytes(const Call& call, int rank, int nranks) {
  const size_t bytes = call.count * element_size(call.type);
  switch (call.kind) {
    case Kind::Broadcast:
      return rank == call.root ? bytes : 0;
    case Kind::ReduceScatter:
      return bytes * static_cast<size_t>(nranks);
    case Kind::Recv:
      return 0;
    default:
      return bytes;
  }
}

size_t recv_bytes(const Call& call, int rank, int nranks) {
  const size_t bytes = call.count * element_size(call.type);
  switch (call.kind) {
    case Kind::Reduce:
      return rank == call.root ? bytes : 0;
    case Kind::AllGather:
      return bytes * static_cast<size_t>(nranks);
    case Kind::Send:
      return 0;
    default:
      return bytes;
  }
}

std::string run_calls(Segment& segment, const RankPlace& place, const std::vector<Call>& calls) {
  // One queue for the collectives (they share the barrier, so they run in call order) and one
  // per direction and peer (messages on a channel are matched in order).
  std::vector<std::deque<std::unique_ptr<Task>>> queues(1);
  std::map<std::pair<Kind, int>, size_t> queue_of;
  for (const Call& call : calls) {
    if (is_collective(call.kind)) {
      queues[0].push_back(std::make_unique<CollectiveTask>(segment, place, call));
      continue;
    }
    auto [it, added] = queue_of.emplace(std::make_pair(call.kind, call.root), queues.size());
    if (added) queues.emplace_back();
    queues[it->second].push_back(std::make_unique<PointToPointTask>(segment, place, call));
  }
  auto last_check = std::chrono::steady_clock::now();
  std::string absent;
  ncclResult_t absent_result = ncclSuccess;
  while (true) {
    const uint32_t seen = segment.snapshot();
    bool progressed = false;
    const Task* waiting = nullptr;
    for (auto& queue : queues) {
      while (!queue.empty()) {
        Task& task = *queue.front();
        if (segment.failed()) return task.where() + " failed: " + segment.failure_reason();
        progressed |= task.step();
        if (!task.failure().empty()) {
          segment.fail(ncclInvalidUsage, task.failure());
          return task.where() + ": " + task.failure();
        }
        if (!task.done()) break;
        queue.pop_front();
        progressed = true;
      }
      if (!queue.empty() && waiting == nullptr) waiting = queue.front().get();
    }
    if (waiting == nullptr) return "";
    if (segment.failed()) return waiting->where() + " failed: " + segment.failure_reason();
    if (progressed) {
      absent.clear();
      continue;
    }
    // A peer that can never arrive turns the wait into a failure (NCCL reports a peer process that
    // ended as a remote error); one that merely has not arrived yet is waited for without end.
    // Absence is confirmed by one more pass: a peer may have finished (and left) after this rank
    // last looked.
    if (!absent.empty()) {
      segment.fail(absent_result, absent);
      return waiting->where() + " failed: " + segment.failure_reason();
    }
    if (const auto now = std::chrono::steady_clock::now(); now - last_check >= kPeerCheckInterval) {
      last_check = now;
      for (const auto& queue : queues)
        for (int peer : queue.empty() ? std::vector<int>() : queue.front()->peers())
          if (absent.empty()) {
            absent = segment.absence(peer, &absent_result);
            if (!absent.empty()) absent += " while " + queue.front()->where() + " waited for it";
          }
      if (!absent.empty()) continue;
    }
    segment.wait(seen);
  }
}

}  // namespace ember::emu::nccl
