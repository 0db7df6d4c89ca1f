// Ranks of an ncclCommInitRank communicator killed with SIGKILL at any moment (one alone while it
// waits for its peer, both in the middle of all-reduces, both at spread moments from start-up
// through joining) leave nothing behind that is named from the unique id: no /dev/shm entry, no
// file in the temporary directories, no unix socket. The ranks are nccl_peer_main processes,
// siblings started by this test as mpirun starts them.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/cuda/nccl_ranks.h"

extern char** environ;

using namespace ember::testing;

namespace {

constexpr auto kPatience = std::chrono::seconds(30);

// A rank process whose stdout the test reads line by line.
class Peer {
 public:
  Peer(const ncclUniqueId& id, int rank) {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::string binary = runfile("nccl_peer_main"), hex = id_hex(id), rank_text = std::to_string(rank), mode = "loop";
    char* argv[] = {binary.data(), hex.data(), rank_text.data(), mode.data(), nullptr};
    const int spawned = ::posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv, environ);
    ::posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    output_ = fds[0];
    REQUIRE(spawned == 0);
  }
  ~Peer() {
    kill();
    ::close(output_);
  }
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // Whether the process printed `line` (within kPatience; false once it exited).
  bool said(const std::string& line) {
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (true) {
      for (size_t end; (end = pending_.find('\n')) != std::string::npos;) {
        const std::string got = pending_.substr(0, end);
        pending_.erase(0, end + 1);
        if (got == line) return true;
      }
      if (std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{output_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char chunk[256];
      const ssize_t n = ::read(output_, chunk, sizeof(chunk));
      if (n <= 0) return false;
      pending_.append(chunk, static_cast<size_t>(n));
    }
  }

  bool running() {
    if (pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == pid_) pid_ = -1;  // reaped
    return pid_ > 0;
  }

  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int output_ = -1;
  std::string pending_;
};

// The part of the id that names anything made for it: the 16 random bytes after the 8-byte magic.
std::string name_part(const ncclUniqueId& id) { return id_hex(id).substr(2 * 8, 2 * 16); }

// Everything named from the id: entries of /dev/shm and of the temporary directories, and unix
// sockets (/proc/net/unix lists the abstract ones too).
std::vector<std::string> traces(const ncclUniqueId& id) {
  const std::string part = name_part(id);
  std::vector<std::string> found;
  const std::vector<const char*> dirs = {"/dev/shm", "/tmp", std::getenv("TMPDIR"), std::getenv("TEST_TMPDIR")};
  for (const char* dir : dirs) {
    if (dir == nullptr) continue;
    std::unique_ptr<DIR, int (*)(DIR*)> entries(::opendir(dir), &::closedir);
    if (!entries) continue;
    while (const dirent* e = ::readdir(entries.get()))
      if (std::string(e->d_name).find(part) != std::string::npos) found.push_back(std::string(dir) + "/" + e->d_name);
  }
  std::ifstream sockets("/proc/net/unix");
  for (std::string line; std::getline(sockets, line);)
    if (line.find(part) != std::string::npos) found.push_back("unix socket: " + line);
  return found;
}

// Waits until the rank has left a mark named from the id (it is inside ncclCommInitRank).
bool traced(const ncclUniqueId& id, Peer& rank) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (traces(id).empty()) {
    if (std::chrono::steady_clock::now() > deadline || !rank.running()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

ncclUniqueId new_id() {
  ncclUniqueId id;
  REQUIRE_NCCL(ncclGetUniqueId(&id));
  return id;
}

#define CHECK_NOTHING_LEFT(id)                                \
  do {                                                        \
    const std::vector<std::string> left = traces(id);         \
    for (const std::string& what : left) UNSCOPED_INFO(what); \
    CHECK(left.empty());                                      \
  } while (0)

}  // namespace

TEST_CASE("a rank killed while it waits for its peer to join leaves nothing behind", "[nccl]") {
  const ncclUniqueId id = new_id();
  {
    Peer rank0(id, 0);
    REQUIRE(rank0.said("joining"));
    REQUIRE(traced(id, rank0));
    rank0.kill();
  }
  CHECK_NOTHING_LEFT(id);
  // The peer comes after all, finds no one, and is killed too.
  {
    Peer rank1(id, 1);
    REQUIRE(rank1.said("joining"));
    REQUIRE(traced(id, rank1));
    rank1.kill();
  }
  CHECK_NOTHING_LEFT(id);
}

TEST_CASE("ranks killed in the middle of collectives leave nothing behind", "[nccl]") {
  const ncclUniqueId id = new_id();
  {
    Peer rank0(id, 0), rank1(id, 1);
    REQUIRE(rank0.said("collective"));
    REQUIRE(rank1.said("collective"));
    rank0.kill();
    rank1.kill();
  }
  CHECK_NOTHING_LEFT(id);
}

TEST_CASE("ranks killed at spread moments from start-up through joining leave nothing behind", "[nccl]") {
  for (int moment = 0; moment < 20; ++moment) {
    INFO("killed " << moment << " ms after both said they were joining");
    const ncclUniqueId id = new_id();
    {
      Peer rank0(id, 0), rank1(id, 1);
      REQUIRE(rank0.said("joining"));
      REQUIRE(rank1.said("joining"));
      std::this_thread::sleep_for(std::chrono::milliseconds(moment));
      rank0.kill();
      rank1.kill();
    }
    CHECK_NOTHING_LEFT(id);
  }
}
