// The Store over TCP: one process (rank 0, as PyTorch's TCPStore) serves it from a thread of its
// own, and every process, the server's included, is a client over one connection.
//
//   auto store = TcpStore::connect({.host = "10.0.0.1", .port = 29500, .job = "run-7"});
//
// The server listens only where it is told (127.0.0.1 unless `host` names another address;
// "0.0.0.0" for every interface). A client retries until the server is up, for at most
// `timeout`. Each connection starts with the job's name: a store serving another job (a stale
// one left from an earlier run on the same port) refuses it, and the client's error names both.
// Requests are checked before anything is stored: a key over 4 KiB, a value over 64 MiB, an
// unknown command or a malformed length ends that connection alone (the server keeps serving).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "comm/store.h"

namespace ember::comm {

struct TcpStoreOptions {
  std::string host = "127.0.0.1";
  int port = 29500;  // 0 when serving: any free port (port() says which)
  std::string job = "ember";
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // For messages: who this client is ("rank 3").
  std::string who = "this process";
};

class TcpStoreServer;

class TcpStore : public Store {
 public:
  // Serves the store (the port must be free: taken, it raises naming it) and connects to it.
  static std::unique_ptr<TcpStore> serve(const TcpStoreOptions& options);
  // Connects to a store served elsewhere, retrying until `timeout`.
  static std::unique_ptr<TcpStore> connect(const TcpStoreOptions& options);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::vector<uint8_t> compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                   const std::vector<uint8_t>& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  bool erase(const std::string& key) override;
  int64_t num_keys() override;
  using Store::set;

  int port() const { return port_; }
  bool serving() const { return server_ != nullptr; }

 private:
  explicit TcpStore(const TcpStoreOptions& options);
  struct Reply;
  // Sends one request and reads its reply, waiting up to `wait` (the request's own timeout) and
  // a grace period more; `op` and `what` name the call in errors.
  Reply request(const std::vector<uint8_t>& message, const char* op, const std::string& what,
                std::chrono::milliseconds wait);

  TcpStoreOptions options_;
  int port_ = 0;
  int fd_ = -1;
  std::mutex mutex_;    // one request at a time on the connection
  std::string broken_;  // why the connection is unusable (a reply lost midway), else empty
  std::unique_ptr<TcpStoreServer> server_;
};

// The wire format's limits (tcp_store.cc), for tests.
constexpr size_t kStoreMaxKeyBytes = 4096;
constexpr size_t kStoreMaxValueBytes = size_t{64} << 20;

}  // namespace ember::comm
