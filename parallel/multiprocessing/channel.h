// Messages between processes: bytes plus descriptors over a UNIX SOCK_SEQPACKET socket, so each
// send arrives whole and many processes can share one socket (a Queue). A message too large for
// the socket buffer travels in a memfd. Tensors are written into messages as handles (shared
// memory) or by value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/shared_memory.h"
#include "core/tensor.h"

namespace ember::multiprocessing::detail {

struct Message {
  std::string bytes;
  std::vector<int> fds;  // owned by the message once received; sent ones stay the caller's
  std::vector<std::shared_ptr<shm::Segment>> keep_alive;  // what the sent descriptors belong to
};

// A SOCK_SEQPACKET socket pair, both ends close-on-exec.
void socket_pair(int fds[2], const char* op);
// Blocks until sent. Errors name `op`.
void send_message(int socket, const Message& message, const char* op);
// Waits up to timeout_ms (-1: forever) for one message. Nothing on timeout; `eof` set (and
// nothing returned) when every sender is gone. Received descriptors are close-on-exec.
std::optional<Message> receive_message(int socket, int timeout_ms, const char* op, bool* eof = nullptr);
void close_fds(std::vector<int>& fds);

class Writer {
 public:
  void u64(uint64_t v);
  void text(const std::string& s);
  void raw(const void* data, size_t n);
  // Sends a descriptor the caller keeps open until the message is sent; returns its index.
  size_t fd(int fd);
  // A shared tensor's storage travels as a descriptor (once per segment per message), any other
  // tensor's values by copy.
  void tensor(const Tensor& t);
  Message finish();

 private:
  std::string bytes_;
  std::vector<int> fds_;
  // Beside each descriptor, the segment it belongs to (null for other descriptors).
  std::vector<std::shared_ptr<shm::Segment>> owners_;
};

class Reader {
 public:
  Reader(Message& message, const char* op);
  ~Reader();
  uint64_t u64();
  std::string text();
  void raw(void* out, size_t n);
  Tensor tensor();
  // Hands out a received descriptor (not closed by the reader): a Queue's socket ends.
  int take_fd(size_t index);

 private:
  const std::string& bytes_;
  std::vector<int>& fds_;
  std::vector<std::shared_ptr<shm::Segment>> segments_;  // attached lazily, by fd index
  size_t pos_ = 0;
  const char* op_;
};

}  // namespace ember::multiprocessing::detail
