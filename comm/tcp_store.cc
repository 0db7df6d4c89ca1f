// TcpStore's client: one blocking connection, one request at a time (a mutex), each reply read
// with a deadline so a store that went away ends the call with an error instead of a hang.
#include "comm/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "comm/tcp_store_server.h"
#include "comm/tcp_store_wire.h"
#include "core/error.h"

namespace ember::comm {

namespace {

using Clock = std::chrono::steady_clock;
using wire::Command;
using wire::Status;

// How long past a waiting request's own timeout the client waits for the server's answer (which
// says "timeout" itself) before deciding the server is gone.
constexpr auto kReplyGrace = std::chrono::seconds(10);

std::string quoted_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < 8; ++i) s += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > 8) s += " and " + std::to_string(keys.size() - 8) + " more";
  return s;
}

void check_key(const std::string& key, const char* op) {
  EMBER_CHECK(key.size() <= kStoreMaxKeyBytes, "comm::TcpStore::", op, ": a key of ", key.size(), " bytes; at most ",
              kStoreMaxKeyBytes);
}

void check_value(size_t bytes, const char* op) {
  EMBER_CHECK(bytes <= kStoreMaxValueBytes, "comm::TcpStore::", op, ": a value of ", bytes, " bytes; at most ",
              kStoreMaxValueBytes);
}

// One attempt to connect to host:port; the socket, or -1 with `error` set.
int try_connect(const std::string& host, int port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    error = std::string("the address does not resolve (") + gai_strerror(rc) + ")";
    return -1;
  }
  int connected = -1;
  for (addrinfo* a = found; a != nullptr && connected < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      connected = fd;
    } else {
      error = std::strerror(errno);
      ::close(fd);
    }
  }
  freeaddrinfo(found);
  return connected;
}

}  // namespace

struct TcpStore::Reply {
  Status status;
  std::vector<uint8_t> body;  // after the status byte
  wire::Reader reader() const { return wire::Reader(body.data(), body.size()); }
};

TcpStore::TcpStore(const TcpStoreOptions& options) : options_(options) { timeout_ = options.timeout; }

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<TcpStore> TcpStore::serve(const TcpStoreOptions& options) {
  auto server = std::make_unique<TcpStoreServer>(options.host, options.port, options.job);
  TcpStoreOptions mine = options;
  mine.port = server->port();
  // The server's own client reaches it where it listens; a wildcard address is reached locally.
  if (mine.host == "0.0.0.0" || mine.host == "::") mine.host = "localhost";
  std::unique_ptr<TcpStore> store = connect(mine);
  store->server_ = std::move(server);
  return store;
}

std::unique_ptr<TcpStore> TcpStore::connect(const TcpStoreOptions& options) {
  std::unique_ptr<TcpStore> store(new TcpStore(options));
  const std::string where = options.host + ":" + std::to_string(options.port);
  const auto deadline = Clock::now() + options.timeout;
  std::string error;
  auto pause = std::chrono::milliseconds(10);
  // The serving rank may start later than this one: retry, backing off to a second.
  while ((store->fd_ = try_connect(options.host, options.port, error)) < 0) {
    EMBER_CHECK(Clock::now() + pause < deadline, "comm::TcpStore: ", options.who, " could not reach the store at ",
                where, " within ", options.timeout.count() / 1000.0, " s (", error,
                "); is the rank that serves it (rank 0) running, and are EMBER_MASTER_ADDR/PORT the same everywhere?");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
  store->port_ = options.port;
  Reply hello = store->request(wire::Writer().u8(static_cast<uint8_t>(Command::Hello)).str(options.job).frame(),
                               "connect", "", std::chrono::milliseconds(0));
  if (hello.status == Status::Refused) {
    auto theirs = hello.reader().str(wire::kMaxBody);
    EMBER_FAIL("comm::TcpStore: ", options.who, " reached a store at ", where, " that serves job '",
               theirs.value_or("?"), "', not this job '", options.job,
               "' (a store left from an earlier job, or two jobs given the same port)");
  }
  EMBER_CHECK(hello.status == Status::Ok, "comm::TcpStore: the store at ", where, " refused ", options.who);
  return store;
}

TcpStore::Reply TcpStore::request(const std::vector<uint8_t>& message, const char* op, const std::string& what,
                                  std::chrono::milliseconds wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string where = options_.host + ":" + std::to_string(port_);
  EMBER_CHECK(broken_.empty(), "comm::TcpStore::", op, (what.empty() ? "" : " " + what), ": ", broken_);
  // Once a request fails midway the connection's framing is lost: every later call says why.
  const auto lost = [&](const std::string& why) {
    broken_ = options_.who + " lost the store at " + where + " (" + why + "); did the rank serving it (rank 0) end?";
    return std::string("comm::TcpStore::") + op + (what.empty() ? "" : " " + what) + ": " + broken_;
  };
  for (size_t off = 0; off < message.size();) {
    ssize_t n = ::send(fd_, message.data() + off, message.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    EMBER_CHECK(n > 0, lost(std::strerror(errno)));
    off += static_cast<size_t>(n);
  }
  const auto deadline = Clock::now() + wait + kReplyGrace;
  std::vector<uint8_t> got;
  size_t need = 4;
  bool have_length = false;
  while (got.size() < need) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    EMBER_CHECK(left > 0, lost("no answer within " + std::to_string((wait + kReplyGrace).count() / 1000) + " s"));
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    uint8_t buffer[1 << 16];
    ssize_t n = ::recv(fd_, buffer, std::min(sizeof(buffer), need - got.size()), 0);
    if (n < 0 && errno == EINTR) continue;
    EMBER_CHECK(n > 0, lost(n == 0 ? "the connection was closed" : std::strerror(errno)));
    got.insert(got.end(), buffer, buffer + n);
    if (!have_length && got.size() == 4) {
      uint32_t length;
      std::memcpy(&length, got.data(), 4);
      EMBER_CHECK(length >= 1 && length <= wire::kMaxBody, lost("a malformed answer"));
      need = 4 + length;
      have_length = true;
    }
  }
  Reply reply{static_cast<Status>(got[4]), std::vector<uint8_t>(got.begin() + 5, got.end())};
  if (reply.status == Status::Failed) {
    auto why = reply.reader().str(wire::kMaxBody);
    EMBER_FAIL("comm::TcpStore::", op, ": ", why.value_or("failed"));
  }
  return reply;
}

void TcpStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  check_key(key, "set");
  check_value(value.size(), "set");
  request(wire::Writer().u8(static_cast<uint8_t>(Command::Set)).str(key).blob(value).frame(), "set", "'" + key + "'",
          std::chrono::milliseconds(0));
}

std::vector<uint8_t> TcpStore::get(const std::string& key) {
  check_key(key, "get");
  Reply r = request(wire::Writer()
                        .u8(static_cast<uint8_t>(Command::Get))
                        .str(key)
                        .u64(static_cast<uint64_t>(timeout_.count()))
                        .frame(),
                    "get", "'" + key + "'", timeout_);
  EMBER_CHECK(r.status != Status::Timeout, "comm::TcpStore::get: ", options_.who, " waited ", timeout_.count() / 1000.0,
              " s for the key '", key, "', which no rank set");
  auto value = r.reader().blob(kStoreMaxValueBytes);
  EMBER_CHECK(value.has_value(), "comm::TcpStore::get '", key, "': a malformed answer");
  return *value;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  check_key(key, "add");
  Reply r = request(wire::Writer().u8(static_cast<uint8_t>(Command::Add)).str(key).i64(delta).frame(), "add",
                    "'" + key + "'", std::chrono::milliseconds(0));
  auto value = r.reader().i64();
  EMBER_CHECK(value.has_value(), "comm::TcpStore::add '", key, "': a malformed answer");
  return *value;
}

std::vector<uint8_t> TcpStore::compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                           const std::vector<uint8_t>& desired) {
  check_key(key, "compare_set");
  check_value(expected.size(), "compare_set");
  check_value(desired.size(), "compare_set");
  Reply r = request(
      wire::Writer().u8(static_cast<uint8_t>(Command::CompareSet)).str(key).blob(expected).blob(desired).frame(),
      "compare_set", "'" + key + "'", std::chrono::milliseconds(0));
  auto value = r.reader().blob(kStoreMaxValueBytes);
  EMBER_CHECK(value.has_value(), "comm::TcpStore::compare_set '", key, "': a malformed answer");
  return *value;
}

namespace {

// A Wait or Check request's command and keys (each checked; `op` names the call).
wire::Writer keys_request(Command command, const std::vector<std::string>& keys, const char* op) {
  EMBER_CHECK(keys.size() <= wire::kMaxKeys, "comm::TcpStore::", op, ": ", keys.size(), " keys; at most ",
              wire::kMaxKeys);
  wire::Writer w;
  w.u8(static_cast<uint8_t>(command)).u32(static_cast<uint32_t>(keys.size()));
  for (const auto& key : keys) {
    check_key(key, op);
    w.str(key);
  }
  return w;
}

}  // namespace

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  wire::Writer w = keys_request(Command::Wait, keys, "wait");
  w.u64(static_cast<uint64_t>(timeout.count()));
  Reply r = request(w.frame(), "wait", "for " + quoted_keys(keys), timeout);
  EMBER_CHECK(r.status != Status::Timeout, "comm::TcpStore::wait: ", options_.who, " waited ", timeout.count() / 1000.0,
              " s for ", quoted_keys(keys), "; not every one was set");
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  Reply r = request(keys_request(Command::Check, keys, "check").frame(), "check", quoted_keys(keys),
                    std::chrono::milliseconds(0));
  auto all = r.reader().u8();
  EMBER_CHECK(all.has_value(), "comm::TcpStore::check: a malformed answer");
  return *all != 0;
}

bool TcpStore::erase(const std::string& key) {
  check_key(key, "erase");
  Reply r = request(wire::Writer().u8(static_cast<uint8_t>(Command::Erase)).str(key).frame(), "erase", "'" + key + "'",
                    std::chrono::milliseconds(0));
  auto erased = r.reader().u8();
  EMBER_CHECK(erased.has_value(), "comm::TcpStore::erase: a malformed answer");
  return *erased != 0;
}

int64_t TcpStore::num_keys() {
  Reply r = request(wire::Writer().u8(static_cast<uint8_t>(Command::NumKeys)).frame(), "num_keys", "",
                    std::chrono::milliseconds(0));
  auto n = r.reader().i64();
  EMBER_CHECK(n.has_value(), "comm::TcpStore::num_keys: a malformed answer");
  return *n;
}

}  // namespace ember::comm
