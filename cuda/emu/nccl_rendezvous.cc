// The abstract socket of a unique id: claiming it, the thread that hands the memfd to each
// joining rank, and receiving it. A peer must be of the same user (SO_PEERCRED, both ways), as
// the 0600 mode of a /dev/shm object would have required.
#include "cuda/emu/nccl_rendezvous.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <system_error>

namespace ember::emu::nccl {

namespace {

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno); }

// The abstract address of `name`: a leading NUL, no terminating one.
socklen_t address(const std::string& name, sockaddr_un* a) {
  std::memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(a->sun_path) - 1);
  std::memcpy(a->sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

bool same_user(int socket, uid_t* uid) {
  ucred peer{};
  socklen_t length = sizeof(peer);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) return false;
  *uid = peer.uid;
  return peer.uid == ::geteuid();
}

// One byte with room for one descriptor (SCM_RIGHTS), to send or to receive.
struct DescriptorMessage {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr header{};
  DescriptorMessage() {
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
  }
  DescriptorMessage(const DescriptorMessage&) = delete;
  DescriptorMessage& operator=(const DescriptorMessage&) = delete;
};

void send_descriptor(int socket, int fd) {
  DescriptorMessage message;
  cmsghdr* c = CMSG_FIRSTHDR(&message.header);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  while (::sendmsg(socket, &message.header, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

}  // namespace

std::unique_ptr<Rendezvous> Rendezvous::claim(const std::string& name, bool* taken, std::string* error) {
  *taken = false;
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return *error = system_error("socket"), nullptr;
  sockaddr_un a;
  const socklen_t length = address(name, &a);
  if (::bind(listener, reinterpret_cast<const sockaddr*>(&a), length) != 0) {
    *taken = errno == EADDRINUSE;
    if (!*taken) *error = system_error("bind @" + name);
    ::close(listener);
    return nullptr;
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC);
  if (::listen(listener, SOMAXCONN) != 0 || wake < 0) {
    *error = system_error(wake < 0 ? "eventfd" : "listen @" + name);
    ::close(listener);
    if (wake >= 0) ::close(wake);
    return nullptr;
  }
  return std::unique_ptr<Rendezvous>(new Rendezvous(listener, wake));
}

Rendezvous::~Rendezvous() { stop(); }

bool Rendezvous::serve(int memory, std::string* error) {
  memory_ = memory;
  try {
    server_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    *error = std::string("cannot start the thread that hands out the communicator's memory: ") + e.what();
    return false;
  }
  return true;
}

void Rendezvous::run() {
  pollfd watched[2] = {{listener_, POLLIN, 0}, {wake_, POLLIN, 0}};
  while (true) {
    if (::poll(watched, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (watched[1].revents != 0) return;
    const int peer = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (peer < 0) {
      // Out of descriptors, say: the connection stays queued, so poll would return at once.
      if (errno != EINTR && errno != ECONNABORTED) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    uid_t uid = 0;
    if (same_user(peer, &uid)) send_descriptor(peer, memory_);
    ::close(peer);  // a refused peer reads end-of-file
  }
}

void Rendezvous::stop() {
  if (server_.joinable()) {
    const uint64_t one = 1;
    while (::write(wake_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
    server_.join();
  }
  for (int* fd : {&listener_, &wake_, &memory_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

int receive_memory(const std::string& name, std::chrono::steady_clock::time_point deadline, bool* absent,
                   std::string* error) {
  *absent = false;
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return *error = system_error("socket"), -1;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{s};
  sockaddr_un a;
  const socklen_t length = address(name, &a);
  if (::connect(s, reinterpret_cast<const sockaddr*>(&a), length) != 0) {
    *absent = errno == ECONNREFUSED || errno == ENOENT;
    return *error = system_error("connect @" + name), -1;
  }
  uid_t uid = 0;
  if (!same_user(s, &uid))
    return *error = "@" + name + " is held by a process of another user (uid " + std::to_string(uid) + ")", -1;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{s, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return *error = system_error("poll @" + name), -1;
    if (ready == 0) return *error = "the rank that created the communicator did not hand over its memory in time", -1;
    break;
  }
  DescriptorMessage message;
  ssize_t n;
  while ((n = ::recvmsg(s, &message.header, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n < 0 && errno != ECONNRESET) return *error = system_error("recvmsg @" + name), -1;
  if ((message.header.msg_flags & MSG_CTRUNC) != 0)
    return *error = "the communicator's memory arrived without its descriptor: too many open files (ulimit -n)", -1;
  const cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&message.header) : nullptr;
  if (c == nullptr || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
    *error =
        "the rank that created the communicator stopped serving it before this rank joined: every rank of "
        "this unique id has joined already (an id from ncclGetUniqueId serves one communicator), or that rank "
        "failed or exited";
    return -1;
  }
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

}  // namespace ember::emu::nccl
