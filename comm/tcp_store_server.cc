#include "comm/tcp_store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <unordered_map>

#include "comm/tcp_store_wire.h"
#include "core/error.h"

namespace ember::comm {

namespace {

using Clock = std::chrono::steady_clock;
using wire::Command;
using wire::Status;

struct Connection {
  int fd = -1;
  bool hello = false;  // the job agreed; until then only Hello is served
  std::vector<uint8_t> in;
  std::vector<uint8_t> out;
  size_t sent = 0;       // of `out`
  bool closing = false;  // close once `out` is sent (a refused Hello)
  bool waiting = false;  // a Get or Wait is pending: no further request is read meanwhile
};

struct Waiter {
  int fd;
  Command command;
  std::vector<std::string> keys;
  Clock::time_point deadline;
};

std::vector<uint8_t> reply(Status status) { return wire::Writer().u8(static_cast<uint8_t>(status)).frame(); }

bool parse_int(const std::vector<uint8_t>& v, int64_t& out) {
  std::string s(v.begin(), v.end());
  if (s.empty() || s.size() > 20) return false;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  out = x;
  return true;
}

}  // namespace

struct TcpStoreServer::State {
  std::string job;
  std::map<std::string, std::vector<uint8_t>> data;
  std::unordered_map<int, Connection> connections;
  std::vector<Waiter> waiters;

  void send(Connection& c, const std::vector<uint8_t>& frame) { c.out.insert(c.out.end(), frame.begin(), frame.end()); }

  bool all_set(const std::vector<std::string>& keys) const {
    for (const auto& k : keys)
      if (data.find(k) == data.end()) return false;
    return true;
  }

  // Answers a waiting request whose keys are all set, or whose deadline passed.
  void answer(const Waiter& w, bool timed_out) {
    auto it = connections.find(w.fd);
    if (it == connections.end()) return;
    Connection& c = it->second;
    c.waiting = false;
    if (timed_out) {
      send(c, reply(Status::Timeout));
    } else if (w.command == Command::Get) {
      send(c, wire::Writer().u8(0).blob(data[w.keys[0]]).frame());
    } else {
      send(c, reply(Status::Ok));
    }
  }

  void settle_waiters(Clock::time_point now) {
    for (size_t i = 0; i < waiters.size();) {
      const bool ready = all_set(waiters[i].keys);
      if (ready || now >= waiters[i].deadline) {
        Waiter w = std::move(waiters[i]);
        waiters.erase(waiters.begin() + static_cast<long>(i));
        answer(w, !ready);
      } else {
        ++i;
      }
    }
  }

  // Serves one request's body; false when it is malformed (the connection is then dropped).
  bool handle(Connection& c, const uint8_t* body, size_t n) {
    wire::Reader r(body, n);
    auto command = r.u8();
    if (!command) return false;
    const auto cmd = static_cast<Command>(*command);
    if (!c.hello && cmd != Command::Hello) return false;
    switch (cmd) {
      case Command::Hello: {
        auto job = r.str(wire::kMaxBody);
        if (!job || !r.at_end() || c.hello) return false;
        if (*job == this->job) {
          c.hello = true;
          send(c, reply(Status::Ok));
        } else {
          send(c, wire::Writer().u8(static_cast<uint8_t>(Status::Refused)).str(this->job).frame());
          c.closing = true;
        }
        return true;
      }
      case Command::Set: {
        auto key = r.str(kStoreMaxKeyBytes);
        auto value = r.blob(kStoreMaxValueBytes);
        if (!r.at_end()) return false;
        data[*key] = std::move(*value);
        send(c, reply(Status::Ok));
        return true;
      }
      case Command::Get:
      case Command::Wait: {
        std::vector<std::string> keys;
        if (cmd == Command::Get) {
          auto key = r.str(kStoreMaxKeyBytes);
          if (!key) return false;
          keys.push_back(std::move(*key));
        } else {
          auto count = r.u32();
          if (!count || *count > wire::kMaxKeys) return false;
          for (uint32_t i = 0; i < *count; ++i) {
            auto key = r.str(kStoreMaxKeyBytes);
            if (!key) return false;
            keys.push_back(std::move(*key));
          }
        }
        auto timeout_ms = r.u64();
        if (!r.at_end()) return false;
        const auto limit = std::chrono::hours(24 * 365);
        const auto wait = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(*timeout_ms), limit);
        c.waiting = true;
        waiters.push_back({c.fd, cmd, std::move(keys), Clock::now() + wait});
        return true;  // answered by settle_waiters, now or later
      }
      case Command::Add: {
        auto key = r.str(kStoreMaxKeyBytes);
        auto delta = r.i64();
        if (!r.at_end()) return false;
        int64_t value = 0;
        auto it = data.find(*key);
        if (it != data.end() && !parse_int(it->second, value)) {
          send(c, wire::Writer()
                      .u8(static_cast<uint8_t>(Status::Failed))
                      .str("the key '" + *key + "' holds a value that is not an integer")
                      .frame());
          return true;
        }
        value += *delta;
        std::string text = std::to_string(value);
        data[*key] = std::vector<uint8_t>(text.begin(), text.end());
        send(c, wire::Writer().u8(0).i64(value).frame());
        return true;
      }
      case Command::CompareSet: {
        auto key = r.str(kStoreMaxKeyBytes);
        auto expected = r.blob(kStoreMaxValueBytes);
        auto desired = r.blob(kStoreMaxValueBytes);
        if (!r.at_end()) return false;
        auto it = data.find(*key);
        if ((it == data.end() && expected->empty()) || (it != data.end() && it->second == *expected)) {
          data[*key] = *desired;
          send(c, wire::Writer().u8(0).blob(*desired).frame());
        } else {
          send(c, wire::Writer().u8(0).blob(it == data.end() ? *expected : it->second).frame());
        }
        return true;
      }
      case Command::Check: {
        auto count = r.u32();
        if (!count || *count > wire::kMaxKeys) return false;
        bool all = true;
        for (uint32_t i = 0; i < *count; ++i) {
          auto key = r.str(kStoreMaxKeyBytes);
          if (!key) return false;
          all = all && data.count(*key) > 0;
        }
        if (!r.at_end()) return false;
        send(c, wire::Writer().u8(0).u8(all ? 1 : 0).frame());
        return true;
      }
      case Command::Erase: {
        auto key = r.str(kStoreMaxKeyBytes);
        if (!r.at_end()) return false;
        const bool erased = data.erase(*key) > 0;
        send(c, wire::Writer().u8(0).u8(erased ? 1 : 0).frame());
        return true;
      }
      case Command::NumKeys:
        if (!r.at_end()) return false;
        send(c, wire::Writer().u8(0).i64(static_cast<int64_t>(data.size())).frame());
        return true;
    }
    return false;  // an unknown command
  }

  // Serves every complete request in the connection's input; false to drop it.
  bool serve_input(Connection& c) {
    size_t used = 0;
    while (!c.waiting && !c.closing && c.in.size() - used >= 4) {
      uint32_t n;
      std::memcpy(&n, c.in.data() + used, 4);
      if (n == 0 || n > wire::kMaxBody) return false;
      if (c.in.size() - used - 4 < n) break;
      if (!handle(c, c.in.data() + used + 4, n)) return false;
      used += 4 + n;
    }
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<long>(used));
    return true;
  }
};

TcpStoreServer::TcpStoreServer(const std::string& host, int port, const std::string& job)
    : state_(std::make_unique<State>()) {
  state_->job = job;
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  EMBER_CHECK(rc == 0, "comm::TcpStore: cannot serve on ", where, ": the address does not resolve (", gai_strerror(rc),
              ")");
  std::string error;
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // A port left in TIME_WAIT by an ended job may be served again; a live listener still makes
    // bind fail (Linux), which is the error users need.
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
      listen_fd_ = fd;
      sockaddr_storage bound{};
      socklen_t len = sizeof(bound);
      getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
      port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    } else {
      error = errno == EADDRINUSE ? "the port is taken (a store of another job, or another program, listens there)"
                                  : std::strerror(errno);
      ::close(fd);
    }
  }
  freeaddrinfo(found);
  EMBER_CHECK(listen_fd_ >= 0, "comm::TcpStore: cannot serve on ", where, ": ", error);
  fcntl(listen_fd_, F_SETFL, O_NONBLOCK);
  if (pipe2(wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(listen_fd_);
    EMBER_FAIL("comm::TcpStore: cannot serve on ", where, ": pipe: ", std::strerror(errno));
  }
  thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  char stop = 1;
  (void)!::write(wake_fds_[1], &stop, 1);
  thread_.join();
  for (auto& [fd, c] : state_->connections) ::close(fd);
  ::close(listen_fd_);
  ::close(wake_fds_[0]);
  ::close(wake_fds_[1]);
}

void TcpStoreServer::serve() {
  State& s = *state_;
  std::vector<pollfd> fds;
  std::vector<uint8_t> chunk(1 << 16);
  while (true) {
    fds.clear();
    fds.push_back({wake_fds_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& [fd, c] : s.connections)
      fds.push_back({fd, static_cast<short>((c.waiting ? 0 : POLLIN) | (c.sent < c.out.size() ? POLLOUT : 0)), 0});
    int timeout_ms = -1;
    const auto now = Clock::now();
    for (const Waiter& w : s.waiters) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(w.deadline - now).count();
      const int ms = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left, 1 << 30)));
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;  // the destructor
    if (fds[1].revents & POLLIN) {
      while (true) {
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        s.connections[fd].fd = fd;
      }
    }
    std::vector<int> dropped;
    for (size_t i = 2; i < fds.size(); ++i) {
      Connection& c = s.connections[fds[i].fd];
      bool drop = false;
      if (fds[i].revents & POLLIN) {
        ssize_t n = ::recv(c.fd, chunk.data(), chunk.size(), 0);
        if (n > 0) {
          c.in.insert(c.in.end(), chunk.begin(), chunk.begin() + n);
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          drop = true;
        }
      } else if (fds[i].revents & (POLLHUP | POLLERR | POLLNVAL)) {
        drop = true;
      }
      if (!drop && c.sent < c.out.size() && (fds[i].revents & POLLOUT)) {
        ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n > 0)
          c.sent += static_cast<size_t>(n);
        else if (errno != EAGAIN && errno != EINTR)
          drop = true;
        if (c.sent == c.out.size()) c.out.clear(), c.sent = 0;
      }
      if (drop) dropped.push_back(c.fd);
    }
    for (int fd : dropped) drop(fd);
    // Requests are served after the reads, and again once waits are answered: a connection whose
    // wait just ended may have its next request buffered already.
    for (int round = 0; round < 2; ++round) {
      dropped.clear();
      for (auto& [fd, c] : s.connections) {
        if (!c.waiting && !c.closing && !c.in.empty() && !s.serve_input(c)) dropped.push_back(fd);
      }
      for (int fd : dropped) drop(fd);
      s.settle_waiters(Clock::now());
    }
    // A refused Hello's answer is written, then the connection closed.
    dropped.clear();
    for (auto& [fd, c] : s.connections)
      if (c.closing && c.out.empty()) dropped.push_back(fd);
    for (int fd : dropped) drop(fd);
  }
}

void TcpStoreServer::drop(int fd) {
  ::close(fd);
  state_->connections.erase(fd);
  std::erase_if(state_->waiters, [fd](const Waiter& w) { return w.fd == fd; });
}

}  // namespace ember::comm
