// The serving side of TcpStore: a thread that polls the listening socket and every connection
// (non-blocking, each with its own input and output buffers, so a slow or broken client holds up
// no other), keeps the keys, and answers waiting requests when their keys arrive or their
// deadline passes.
#pragma once

#include <memory>
#include <string>
#include <thread>

namespace ember::comm {

class TcpStoreServer {
 public:
  // Binds host:port (0: any free port) and starts serving; raises naming the address when it
  // cannot (the port taken, an address not of this machine).
  TcpStoreServer(const std::string& host, int port, const std::string& job);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }

 private:
  struct State;
  void serve();
  void drop(int fd);

  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};  // a pipe: the destructor writes, the poll wakes
  int port_ = 0;
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace ember::comm
