// DataParallel's host threads: replica 0 runs on the caller's thread and replica k on worker k,
// each with the caller's grad mode and, on every device involved, the caller's current stream.
// Sharing the caller's streams is what orders everything without events: a replica's kernels
// queue behind the caller's earlier work (the optimizer step), and the caller's later work (the
// gather, the backward) queues behind the replica's.
//
// Replicas meet in a ReplicaRendezvous (SyncBatchNorm across replicas). When one replica fails,
// the rendezvous is aborted so that the others fail at their next meeting instead of waiting for
// a partner that never comes; the caller gets the first failure, naming the replica's device.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/autocast.h"
#include "core/runtime.h"
#include "core/tensor.h"

namespace ember::parallel {

// What a replica brings to a meeting: a tensor on its device, and a host number (a count) that
// needs no trip through the device.
struct Contribution {
  Tensor tensor;
  int64_t count = 0;
};

class ReplicaRendezvous {
 public:
  // Starts a new run of `count` replicas (clears an earlier abort).
  void reset(size_t count);
  // Replica `replica` contributes `mine`; returns every replica's contribution, in replica order,
  // once all have arrived. `what` names the meeting in errors ("SyncBatchNorm statistics").
  std::vector<Contribution> exchange(size_t replica, Contribution mine, const char* what);
  // Fails every waiting and later exchange of this run with `reason`.
  void abort(const std::string& reason);
  // Replica `replica` finished its part of the run: a meeting it did not join can never complete
  // (the replicas ran different SyncBatchNorm layers), so whoever waits there fails, naming it.
  void finished(size_t replica, Device device);

 private:
  std::mutex mutex_;
  std::condition_variable arrived_cv_;
  size_t count_ = 0;
  size_t arrived_ = 0;
  uint64_t round_ = 0;
  std::vector<Contribution> slots_;
  std::vector<Contribution> result_;
  std::string aborted_;   // the reason, empty while the run is healthy
  std::string departed_;  // set once a replica finished: a later meeting cannot complete
};

// The replica this thread runs for DataParallel (null outside a replica).
struct ReplicaContext {
  size_t index = 0;
  size_t count = 1;
  Device device;
  ReplicaRendezvous* rendezvous = nullptr;
};
const ReplicaContext* current_replica();

class ReplicaThreads {
 public:
  // `devices[k]` is replica k's device; threads for replicas 1.. start now and live until
  // destruction. `owner` names the caller in errors ("DataParallel").
  ReplicaThreads(std::vector<Device> devices, std::string owner);
  // A pipeline's stages: every unit on a worker of its own (the caller only waits, so its
  // current streams stay its own), `unit` naming them in errors ("stage"), and no ReplicaContext
  // (stages are not replicas: a replica-synchronised BatchNorm must not meet across them).
  struct StageThreads {};
  ReplicaThreads(std::vector<Device> devices, std::string owner, StageThreads);
  ~ReplicaThreads();
  ReplicaThreads(const ReplicaThreads&) = delete;
  ReplicaThreads& operator=(const ReplicaThreads&) = delete;

  // Runs fn(k) for k in [0, count) at once, each on its replica's thread, and returns when all
  // have returned. A failure is rethrown as an Error "<owner>: replica k on cuda:K failed: <what>".
  // `stream_devices`: the devices whose current stream the replicas take from the caller.
  void run(size_t count, const std::vector<Device>& stream_devices, const std::function<void(size_t)>& fn);

  const std::vector<Device>& devices() const { return devices_; }

 private:
  struct Task {
    const std::function<void(size_t)>* fn = nullptr;
    std::vector<Stream> streams;  // the caller's current ones, taken per run
    bool grad_enabled = true;
    autocast::State autocast;
    size_t count = 0;
  };
  void work(size_t replica);
  // Runs replica `replica` of the current task on this thread; records a failure.
  void run_one(size_t replica);

  std::vector<Device> devices_;
  std::string owner_;
  std::string unit_ = "replica";
  bool caller_runs_first_ = true;
  ReplicaRendezvous rendezvous_;
  std::vector<std::thread> threads_;

  std::mutex mutex_;
  std::condition_variable start_cv_, done_cv_;
  uint64_t generation_ = 0;  // bumped per run: a worker runs each generation once
  size_t pending_ = 0;       // workers still running the current generation
  bool stopping_ = false;
  bool running_ = false;
  Task task_;
  int first_failed_ = -1;  // the replica that failed first (the cause; the others were aborted)
  std::string failure_;
};

}  // namespace ember::parallel
