// How the processes of an ncclCommInitRank communicator come to share its memory with nothing
// named in a filesystem: the first rank to bind the id's abstract unix socket creates the memory
// (a memfd) and, from a thread of its own, hands its descriptor (SCM_RIGHTS) to every rank of the
// same user that connects, until all have joined. The kernel frees the socket with the process
// holding it and the memory with the last process mapping it, however they end (kill -9
// included). The ranks must share a network namespace (abstract names live in one), as processes
// under one mpirun, or threads of one process, do.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

namespace ember::emu::nccl {

class Rendezvous {
 public:
  // Binds and listens on the abstract socket `name`; peers that connect now wait until serve().
  // Null when another rank holds the name (*taken) or on a failure (*error).
  static std::unique_ptr<Rendezvous> claim(const std::string& name, bool* taken, std::string* error);
  ~Rendezvous();  // stop()
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // Hands `memory` (owned from now on) to each rank that connects, until stop().
  bool serve(int memory, std::string* error);
  // Closes the socket (the name is free again) and the descriptor.
  void stop();

 private:
  Rendezvous(int listener, int wake) : listener_(listener), wake_(wake) {}
  void run();
  int listener_, wake_;  // wake_: an eventfd that ends run()
  int memory_ = -1;
  std::thread server_;
};

// Connects to the rank that serves `name` and returns the memory's descriptor, waiting for it
// until `deadline`. -1 on failure, with *error set; *absent when no rank holds the name (it may be
// claimed again).
int receive_memory(const std::string& name, std::chrono::steady_clock::time_point deadline, bool* absent,
                   std::string* error);

}  // namespace ember::emu::nccl
