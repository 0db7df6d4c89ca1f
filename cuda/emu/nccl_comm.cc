// Communicator state and the stream operation that runs a group's calls. Operations of one
// communicator run one at a time in call order, whatever streams they were queued on, as NCCL
// serialises a communicator's kernels.
#include "cuda/emu/nccl_comm.h"

#include <algorithm>
#include <set>

#include "cuda/emu/device.h"
#include "cuda/emu/stream.h"

namespace ember::emu::nccl {

namespace {

std::mutex handles_mutex;
std::set<ncclComm_t>& handles() {
  static auto* live = new std::set<ncclComm_t>();
  return *live;
}

// A device with a sticky error runs nothing more, so its rank never arrives: its peers wait, as
// they would for a GPU whose context died.
bool device_failed(int device) {
  Device* d = device_at(device);
  std::lock_guard<std::mutex> lock(d->mutex);
  return d->sticky != cudaSuccess;
}

}  // namespace

RankState::RankState(std::shared_ptr<Segment> segment, RankPlace place)
    : segment_(std::move(segment)),
      place_(place),
      sends_(static_cast<size_t>(place.nranks)),
      receives_(static_cast<size_t>(place.nranks)) {}

uint64_t RankState::launch(std::vector<Call> calls) {
  for (Call& call : calls) {
    const size_t peer = static_cast<size_t>(call.root);
    if (is_collective(call.kind))
      call.seq = collectives_++;
    else
      call.seq = call.kind == Kind::Send ? sends_[peer]++ : receives_[peer]++;
  }
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ticket = issued_++;
  }
  Stream* primary = calls.front().stream;
  std::vector<Stream*> others;
  for (const Call& call : calls)
    if (call.stream != primary && std::find(others.begin(), others.end(), call.stream) == others.end())
      others.push_back(call.stream);
  // The other streams' earlier work comes first, and their later work waits for the operation.
  std::vector<std::shared_ptr<Mark>> reached;
  for (Stream* s : others) reached.push_back(s->mark());
  auto done = std::make_shared<Mark>();
  primary->enqueue([self = shared_from_this(), ticket, calls = std::move(calls), reached, done] {
    for (const auto& mark : reached) mark->wait();
    std::string failure = self->run(ticket, calls);
    done->complete();
    return failure;
  });
  for (Stream* s : others)
    s->enqueue([done] {
      done->wait();
      return std::string();
    });
  return ticket;
}

std::string RankState::run(uint64_t ticket, const std::vector<Call>& calls) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return finished_ == ticket; });
  }
  std::string failure;
  if (!device_failed(place_.device)) failure = run_calls(*segment_, place_, calls);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure.empty() && error_ == ncclSuccess) {
      error_ = segment_->failed() ? segment_->failure_result() : ncclInternalError;
      message_ = failure;
    }
    ++finished_;
  }
  changed_.notify_all();
  return failure;
}

bool RankState::finished(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_ > ticket;
}

void RankState::wait_all_finished() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return finished_ == issued_; });
}

ncclResult_t RankState::async_error() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_ != ncclSuccess) return error_;
  }
  return segment_->failed() ? segment_->failure_result() : ncclSuccess;
}

std::string RankState::async_message() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!message_.empty()) return message_;
  }
  return segment_->failed() ? segment_->failure_reason() : "";
}

ncclComm_t register_handle(std::shared_ptr<RankState> state) {
  auto* comm = new ncclComm{std::move(state)};
  std::lock_guard<std::mutex> lock(handles_mutex);
  handles().insert(comm);
  return comm;
}

bool unregister_handle(ncclComm_t comm) {
  {
    std::lock_guard<std::mutex> lock(handles_mutex);
    if (handles().erase(comm) == 0) return false;
  }
  delete comm;
  return true;
}

std::shared_ptr<RankState> state_of(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(handles_mutex);
  return handles().count(comm) ? comm->state : nullptr;
}

}  // namespace ember::emu::nccl
