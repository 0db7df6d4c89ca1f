// TcpStore in one process: a served store and clients on threads, as ranks would use it, plus a
// raw socket sending what no client would (malformed frames), after which the store must still
// serve everyone else. Ports are the kernel's free ones (port 0), so concurrent tests never meet.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <thread>

#include "comm/tcp_store.h"
#include "comm/tcp_store_wire.h"
#include "core/error.h"
#include "tests/comm/free_port.h"

using namespace ember;
using namespace ember::comm;
using ember::testing::free_port;
using namespace std::chrono_literals;

namespace {

TcpStoreOptions served(const std::string& job = "test") {
  TcpStoreOptions o;
  o.port = 0;
  o.job = job;
  o.timeout = 20s;
  o.who = "rank 0";
  return o;
}

TcpStoreOptions client_of(const TcpStore& server, const std::string& who, const std::string& job = "test") {
  TcpStoreOptions o;
  o.port = server.port();
  o.job = job;
  o.timeout = 20s;
  o.who = who;
  return o;
}

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

// A raw connection to the store.
int raw_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

void raw_send(int fd, const std::vector<uint8_t>& b) {
  REQUIRE(::send(fd, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size()));
}

// Whether the server closed the connection within 10 s (reading and dropping any answer first).
bool closed_by_server(int fd) {
  const auto end = std::chrono::steady_clock::now() + 10s;
  uint8_t buffer[4096];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return true;
  }
  return false;
}

std::vector<uint8_t> hello(const std::string& job) {
  return wire::Writer().u8(static_cast<uint8_t>(wire::Command::Hello)).str(job).frame();
}

// Reads one whole answer frame (its body) from a raw connection.
std::vector<uint8_t> raw_answer(int fd) {
  std::vector<uint8_t> got;
  size_t need = 4;
  while (got.size() < need) {
    uint8_t b[256];
    ssize_t n = ::recv(fd, b, std::min(sizeof(b), need - got.size()), 0);
    REQUIRE(n > 0);
    got.insert(got.end(), b, b + n);
    if (got.size() == 4) {
      uint32_t len;
      std::memcpy(&len, got.data(), 4);
      need = 4 + len;
    }
  }
  return {got.begin() + 4, got.end()};
}

}  // namespace

TEST_CASE("TcpStore: set, get, add, compare_set, check, erase and num_keys, as PyTorch's TCPStore", "[store]") {
  auto store = TcpStore::serve(served());
  REQUIRE(store->serving());
  REQUIRE(store->port() > 0);
  auto other = TcpStore::connect(client_of(*store, "rank 1"));

  // Values are bytes: zeros and every byte value survive.
  std::vector<uint8_t> all(256 * 3);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint8_t>(i);
  store->set("bytes", all);
  REQUIRE(other->get("bytes") == all);
  store->set("empty", std::vector<uint8_t>{});
  REQUIRE(other->get("empty").empty());
  other->set("name", std::string("ember"));
  REQUIRE(store->get_string("name") == "ember");
  other->set("name", std::string("again"));  // set replaces
  REQUIRE(store->get_string("name") == "again");

  REQUIRE(store->add("counter", 5) == 5);  // unset counts as 0
  REQUIRE(other->add("counter", -7) == -2);
  REQUIRE(store->get_string("counter") == "-2");  // kept as its decimal text, as PyTorch does
  REQUIRE_THROWS_WITH(store->add("name", 1), Catch::Contains("'name' holds a value that is not an integer"));

  // compare_set: unset + empty expected sets; a wrong expected leaves the value and returns it.
  REQUIRE(store->compare_set("owner", {}, bytes("r0")) == bytes("r0"));
  REQUIRE(other->compare_set("owner", {}, bytes("r1")) == bytes("r0"));
  REQUIRE(other->compare_set("owner", bytes("r0"), bytes("r1")) == bytes("r1"));
  REQUIRE(store->get_string("owner") == "r1");
  REQUIRE(store->compare_set("absent", bytes("x"), bytes("y")) == bytes("x"));  // unset, not set
  REQUIRE_FALSE(store->check({"absent"}));

  REQUIRE(store->check({"bytes", "name", "counter"}));
  REQUIRE_FALSE(store->check({"bytes", "nope"}));
  const int64_t keys = store->num_keys();
  REQUIRE(keys == 5);  // bytes, empty, name, counter, owner
  REQUIRE(other->erase("name"));
  REQUIRE_FALSE(other->erase("name"));
  REQUIRE(store->num_keys() == keys - 1);
  REQUIRE_FALSE(store->check({"name"}));

  // A large value, in pieces over the socket both ways.
  std::vector<uint8_t> big(8 << 20);
  std::mt19937 rng(7);
  for (auto& b : big) b = static_cast<uint8_t>(rng());
  other->set("big", big);
  REQUIRE(store->get("big") == big);
}

TEST_CASE("TcpStore: get and wait block until another rank sets the keys", "[store][wait]") {
  auto store = TcpStore::serve(served());
  auto late = TcpStore::connect(client_of(*store, "rank 1"));
  std::thread setter([&] {
    std::this_thread::sleep_for(200ms);
    late->set("a", std::string("1"));
    std::this_thread::sleep_for(100ms);
    late->set("b", std::string("2"));
  });
  auto waiter = TcpStore::connect(client_of(*store, "rank 2"));
  const auto start = std::chrono::steady_clock::now();
  waiter->wait({"a", "b"});
  const auto waited = std::chrono::steady_clock::now() - start;
  REQUIRE(waited >= 250ms);  // both keys, not the first
  REQUIRE(store->get_string("b") == "2");
  setter.join();
  // The same connection serves on after a wait, and get waits too.
  std::thread setter2([&] {
    std::this_thread::sleep_for(100ms);
    late->set("c", std::string("3"));
  });
  REQUIRE(waiter->get_string("c") == "3");
  setter2.join();
}

TEST_CASE("TcpStore: a key nobody sets ends get and wait by the timeout, naming the keys", "[store][timeout]") {
  auto store = TcpStore::serve(served());
  auto client = TcpStore::connect(client_of(*store, "rank 3"));
  client->set_timeout(300ms);
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(client->get("never"),
                      Catch::Contains("rank 3 waited 0.3 s for the key 'never', which no rank set"));
  REQUIRE(std::chrono::steady_clock::now() - start >= 300ms);
  REQUIRE_THROWS_WITH(client->wait({"x", "never"}, 200ms), Catch::Contains("'x', 'never'; not every one was set"));
  // The connection is still good after a timeout.
  client->set("x", std::string("1"));
  REQUIRE(store->get_string("x") == "1");
}

TEST_CASE("TcpStore: concurrent adds are atomic and exactly one compare_set claims a key", "[store][atomic]") {
  auto store = TcpStore::serve(served());
  constexpr int kClients = 6, kAdds = 50;
  std::vector<std::unique_ptr<TcpStore>> clients;
  for (int i = 0; i < kClients; ++i)
    clients.push_back(TcpStore::connect(client_of(*store, "rank " + std::to_string(i))));
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < kAdds; ++k) clients[i]->add("count", 1);
      const auto mine = bytes("rank " + std::to_string(i));
      if (clients[i]->compare_set("rank/0", {}, mine) == mine) winners.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(store->add("count", 0) == kClients * kAdds);
  REQUIRE(winners.load() == 1);
}

TEST_CASE("TcpStore: another job's store, a taken port and no store at all are errors naming them", "[store][errors]") {
  auto store = TcpStore::serve(served("job-A"));
  REQUIRE_THROWS_WITH(TcpStore::connect(client_of(*store, "rank 1", "job-B")),
                      Catch::Contains("rank 1 reached a store at 127.0.0.1:" + std::to_string(store->port()) +
                                      " that serves job 'job-A', not this job 'job-B'"));
  TcpStoreOptions same = served("job-B");
  same.port = store->port();
  REQUIRE_THROWS_WITH(
      TcpStore::serve(same),
      Catch::Contains("cannot serve on 127.0.0.1:" + std::to_string(store->port()) + ": the port is taken"));
  TcpStoreOptions nowhere = served();
  nowhere.port = free_port();
  nowhere.timeout = 500ms;
  nowhere.who = "rank 2";
  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(TcpStore::connect(nowhere), Catch::Contains("rank 2 could not reach the store at 127.0.0.1:" +
                                                                  std::to_string(nowhere.port)) &&
                                                      Catch::Contains("Connection refused"));
  REQUIRE(std::chrono::steady_clock::now() - start < 5s);
  // Keys and values over the limits are refused before anything is sent.
  auto client = TcpStore::connect(client_of(*store, "rank 1", "job-A"));
  REQUIRE_THROWS_WITH(client->set(std::string(kStoreMaxKeyBytes + 1, 'k'), std::string("v")),
                      Catch::Contains("a key of 4097 bytes; at most 4096"));
  REQUIRE_THROWS_WITH(client->set("k", std::vector<uint8_t>(kStoreMaxValueBytes + 1)),
                      Catch::Contains("a value of 67108865 bytes"));
  client->set("k", std::string("still fine"));
  REQUIRE(store->get_string("k") == "still fine");
}

TEST_CASE("TcpStore: the server outlives malformed requests; each ends only its own connection", "[store][malformed]") {
  auto store = TcpStore::serve(served());
  auto good = TcpStore::connect(client_of(*store, "rank 1"));
  const auto frame = [](std::vector<uint8_t> body) {
    std::vector<uint8_t> f(4);
    const uint32_t n = static_cast<uint32_t>(body.size());
    std::memcpy(f.data(), &n, 4);
    f.insert(f.end(), body.begin(), body.end());
    return f;
  };
  struct Case {
    const char* what;
    bool greet;  // send a Hello of the right job first
    std::vector<uint8_t> bytes;
  };
  std::vector<uint8_t> huge_length = {0xff, 0xff, 0xff, 0xff, 1};
  std::vector<uint8_t> zero_length = {0, 0, 0, 0};
  // A Set whose value claims 64 MiB + 1 bytes in a short frame, and one whose key runs past the frame.
  std::vector<uint8_t> long_value =
      wire::Writer().u8(2).str("k").u32(static_cast<uint32_t>(kStoreMaxValueBytes + 1)).frame();
  std::vector<uint8_t> key_past_end = frame({2, 200, 0, 0, 0, 'k'});
  std::vector<uint8_t> long_key = wire::Writer().u8(2).str(std::string(kStoreMaxKeyBytes + 1, 'k')).str("v").frame();
  std::vector<uint8_t> trailing = frame({9, 1, 2, 3});  // NumKeys with bytes after it
  std::vector<uint8_t> too_many_keys = wire::Writer().u8(7).u32(1 << 20).frame();
  for (const Case& c :
       {Case{"an unknown command", true, frame({77})},
        Case{"a request before the hello", false, wire::Writer().u8(9).frame()},
        Case{"a frame of 4 GB", true, huge_length}, Case{"an empty frame", true, zero_length},
        Case{"a value over 64 MiB", true, long_value}, Case{"a key running past its frame", true, key_past_end},
        Case{"a key over 4 KiB", true, long_key}, Case{"bytes after a request", true, trailing},
        Case{"a check of a million keys", true, too_many_keys}, Case{"a second hello", true, hello("test")}}) {
    INFO(c.what);
    int fd = raw_connect(store->port());
    if (c.greet) {
      raw_send(fd, hello("test"));
      REQUIRE(raw_answer(fd) == std::vector<uint8_t>{0});
    }
    raw_send(fd, c.bytes);
    REQUIRE(closed_by_server(fd));
    ::close(fd);
    // Everyone else is served on.
    good->set("alive", std::string(c.what));
    REQUIRE(store->get_string("alive") == c.what);
  }
  // A frame cut short and a client gone mid-wait leave nothing behind either.
  int fd = raw_connect(store->port());
  raw_send(fd, hello("test"));
  REQUIRE(raw_answer(fd) == std::vector<uint8_t>{0});
  raw_send(fd, {50, 0, 0, 0, 2, 1});
  ::close(fd);
  fd = raw_connect(store->port());
  raw_send(fd, hello("test"));
  REQUIRE(raw_answer(fd) == std::vector<uint8_t>{0});
  raw_send(fd, wire::Writer().u8(3).str("never").u64(60000).frame());
  ::close(fd);
  good->set("later", std::string("1"));
  REQUIRE(good->get_string("later") == "1");
  // Random bytes after a hello: closed or answered, never a crash or hang of the server.
  std::mt19937 rng(11);
  for (int i = 0; i < 50; ++i) {
    fd = raw_connect(store->port());
    raw_send(fd, hello("test"));
    raw_answer(fd);
    std::vector<uint8_t> junk(5 + rng() % 60);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    junk[0] = static_cast<uint8_t>(junk.size() - 4 + rng() % 3);  // lengths near the truth
    junk[1] = junk[2] = junk[3] = 0;
    raw_send(fd, junk);
    ::close(fd);
  }
  REQUIRE(good->num_keys() >= 2);
}

TEST_CASE("TcpStore: a client whose store went away gets an error, not a hang", "[store][lost]") {
  auto store = TcpStore::serve(served());
  auto client = TcpStore::connect(client_of(*store, "rank 1"));
  std::string error;
  std::thread waiting([&] {
    try {
      client->get("never");
    } catch (const ember::Error& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(200ms);
  const auto start = std::chrono::steady_clock::now();
  store.reset();  // rank 0 ends
  waiting.join();
  REQUIRE(std::chrono::steady_clock::now() - start < 5s);
  REQUIRE_THAT(error, Catch::Contains("comm::TcpStore::get 'never': rank 1 lost the store at 127.0.0.1:") &&
                          Catch::Contains("the connection was closed"));
  // Every later call says so too.
  REQUIRE_THROWS_WITH(client->set("k", std::string("v")), Catch::Contains("rank 1 lost the store"));
}
