// SOCK_SEQPACKET messages with SCM_RIGHTS descriptors, and the tensor wire format.
#include "parallel/multiprocessing/channel.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "core/factory.h"

namespace ember::multiprocessing::detail {

namespace {

// The kernel passes at most this many descriptors in one message (SCM_MAX_FD).
constexpr size_t kMaxFds = 250;
// Larger messages travel in a memfd: a SEQPACKET message must fit the socket buffer.
constexpr size_t kInlineLimit = 32 * 1024;
constexpr char kInline = 'I', kSpilled = 'S';

enum : uint64_t { kUndefined = 0, kHandle = 1, kCopy = 2 };

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

void socket_pair(int fds[2], const char* op) {
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    EMBER_FAIL(op, ": cannot create a socket pair (", errno_text(errno), ")");
  }
}

void close_fds(std::vector<int>& fds) {
  for (int& fd : fds) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

void send_message(int socket, const Message& message, const char* op) {
  EMBER_CHECK(message.fds.size() < kMaxFds, op, ": a message can carry at most ", kMaxFds - 1,
              " shared-memory segments, got ", message.fds.size(),
              " (share a module with Module::share_memory, which packs it into one segment)");
  std::string frame;
  std::vector<int> fds = message.fds;
  int spill = -1;
  if (message.bytes.size() <= kInlineLimit) {
    frame.reserve(message.bytes.size() + 1);
    frame.push_back(kInline);
    frame += message.bytes;
  } else {
    spill = memfd_create("ember-message", MFD_CLOEXEC);
    EMBER_CHECK(spill >= 0, op, ": cannot create a memfd for a ", message.bytes.size(), "-byte message (",
                errno_text(errno), ")");
    size_t done = 0;
    while (done < message.bytes.size()) {
      const ssize_t n = write(spill, message.bytes.data() + done, message.bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = errno;
        close(spill);
        EMBER_FAIL(op, ": cannot write a ", message.bytes.size(), "-byte message to a memfd (", errno_text(err), ")");
      }
      done += static_cast<size_t>(n);
    }
    frame.push_back(kSpilled);
    const uint64_t size = message.bytes.size();
    frame.append(reinterpret_cast<const char*>(&size), sizeof size);
    fds.push_back(spill);
  }
  iovec iov{frame.data(), frame.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * (fds.empty() ? 1 : fds.size())), 0);
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t sent;
  do {
    sent = sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  const int err = errno;
  if (spill >= 0) close(spill);
  if (sent < 0) {
    EMBER_FAIL(op, ": cannot send a message to another process (",
               err == EPIPE ? "every receiver has exited" : errno_text(err), ")");
  }
}

std::optional<Message> receive_message(int socket, int timeout_ms, const char* op, bool* eof) {
  if (eof != nullptr) *eof = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<char> buffer(kInlineLimit + 64);
  std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxFds));
  for (;;) {
    int wait = -1;
    if (timeout_ms >= 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      wait = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    pollfd p{socket, POLLIN, 0};
    const int ready = poll(&p, 1, wait);
    if (ready < 0 && errno == EINTR) continue;
    EMBER_CHECK(ready >= 0, op, ": poll failed (", errno_text(errno), ")");
    if (ready == 0) return std::nullopt;
    iovec iov{buffer.data(), buffer.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    // Non-blocking: with several receivers on one socket, another may have taken the message
    // between poll and here.
    const ssize_t n = recvmsg(socket, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    EMBER_CHECK(n >= 0, op, ": cannot receive a message (", errno_text(errno), ")");
    Message out;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      const size_t at = out.fds.size();
      out.fds.resize(at + count);
      std::memcpy(out.fds.data() + at, CMSG_DATA(c), count * sizeof(int));
    }
    if (n == 0) {
      if (eof != nullptr) *eof = true;
      return std::nullopt;
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) {
      close_fds(out.fds);
      EMBER_FAIL(op,
                 ": a message arrived without its shared-memory descriptors: this process has too many "
                 "open files (see ulimit -n; it holds one per shared segment it maps)");
    }
    EMBER_CHECK((msg.msg_flags & MSG_TRUNC) == 0 && n >= 1, op, ": a malformed message (", n, " bytes)");
    if (buffer[0] == kInline) {
      out.bytes.assign(buffer.data() + 1, static_cast<size_t>(n - 1));
      return out;
    }
    uint64_t size = 0;
    EMBER_CHECK(buffer[0] == kSpilled && n == 1 + static_cast<ssize_t>(sizeof size) && !out.fds.empty(), op,
                ": a malformed message header");
    std::memcpy(&size, buffer.data() + 1, sizeof size);
    const int spill = out.fds.back();
    out.fds.pop_back();
    out.bytes.resize(size);
    size_t done = 0;
    while (done < size) {
      const ssize_t r = pread(spill, out.bytes.data() + done, size - done, static_cast<off_t>(done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        close(spill);
        close_fds(out.fds);
        EMBER_FAIL(op, ": cannot read a ", size, "-byte message");
      }
      done += static_cast<size_t>(r);
    }
    close(spill);
    return out;
  }
}

// ---- Writer ----

void Writer::u64(uint64_t v) { raw(&v, sizeof v); }

void Writer::text(const std::string& s) {
  u64(s.size());
  raw(s.data(), s.size());
}

void Writer::raw(const void* data, size_t n) { bytes_.append(static_cast<const char*>(data), n); }

size_t Writer::fd(int fd) {
  fds_.push_back(fd);
  owners_.push_back(nullptr);
  return fds_.size() - 1;
}

void Writer::tensor(const Tensor& t) {
  if (!t.defined()) {
    u64(kUndefined);
    return;
  }
  EMBER_CHECK(t.device().type == kCPU, "multiprocessing: only CPU tensors can be sent to another process, got one on ",
              t.device(), " (CUDA memory is not shared between processes; copy it to the CPU first)");
  const auto& segment = t.storage()->shared_segment();
  u64(segment != nullptr ? kHandle : kCopy);
  u64(static_cast<uint64_t>(t.dtype()));
  u64(t.requires_grad() ? 1 : 0);
  u64(t.dim());
  for (int64_t s : t.sizes()) u64(static_cast<uint64_t>(s));
  if (segment != nullptr) {
    for (int64_t s : t.strides()) u64(static_cast<uint64_t>(s));
    // One descriptor per segment per message, however many tensors live in it.
    const auto known = std::find(owners_.begin(), owners_.end(), segment);
    size_t index = static_cast<size_t>(known - owners_.begin());
    if (known == owners_.end()) {
      index = this->fd(segment->fd());
      owners_[index] = segment;
    }
    u64(index);
    u64(t.storage()->shared_offset());
    u64(t.storage()->nbytes());
    u64(static_cast<uint64_t>(t.storage_offset()));
    return;
  }
  const Tensor values = t.contiguous();
  const size_t nbytes = static_cast<size_t>(values.numel()) * element_size(values.dtype());
  u64(nbytes);
  raw(values.data_ptr(), nbytes);
}

Message Writer::finish() {
  Message m;
  m.bytes = std::move(bytes_);
  m.fds = std::move(fds_);
  for (auto& s : owners_) {
    if (s != nullptr) m.keep_alive.push_back(std::move(s));
  }
  return m;
}

// ---- Reader ----

Reader::Reader(Message& message, const char* op)
    : bytes_(message.bytes), fds_(message.fds), segments_(message.fds.size()), op_(op) {}

Reader::~Reader() { close_fds(fds_); }

void Reader::raw(void* out, size_t n) {
  EMBER_CHECK(n <= bytes_.size() - pos_, op_, ": a malformed message (it ends early)");
  std::memcpy(out, bytes_.data() + pos_, n);
  pos_ += n;
}

uint64_t Reader::u64() {
  uint64_t v = 0;
  raw(&v, sizeof v);
  return v;
}

std::string Reader::text() {
  const uint64_t n = u64();
  EMBER_CHECK(n <= bytes_.size() - pos_, op_, ": a malformed message (a string runs past its end)");
  std::string s(bytes_.data() + pos_, n);
  pos_ += n;
  return s;
}

int Reader::take_fd(size_t index) {
  EMBER_CHECK(index < fds_.size() && fds_[index] >= 0, op_, ": a message names descriptor ", index,
              " that it did not carry");
  const int fd = fds_[index];
  fds_[index] = -1;
  return fd;
}

Tensor Reader::tensor() {
  const uint64_t kind = u64();
  if (kind == kUndefined) return Tensor();
  EMBER_CHECK(kind == kHandle || kind == kCopy, op_, ": a malformed tensor (kind ", kind, ")");
  const auto dtype = static_cast<DType>(u64());
  const bool requires_grad = u64() != 0;
  const uint64_t dim = u64();
  EMBER_CHECK(dim <= 64, op_, ": a malformed tensor (", dim, " dimensions)");
  Shape sizes(dim);
  for (auto& s : sizes) s = static_cast<int64_t>(u64());
  Tensor out;
  if (kind == kHandle) {
    Shape strides(dim);
    for (auto& s : strides) s = static_cast<int64_t>(u64());
    const uint64_t index = u64(), offset = u64(), nbytes = u64(), storage_offset = u64();
    EMBER_CHECK(index < segments_.size(), op_, ": a tensor names segment ", index, " of ", segments_.size());
    if (segments_[index] == nullptr) segments_[index] = shm::Segment::attach(take_fd(index), op_);
    Storage storage = shm::storage_in(segments_[index], offset, nbytes);
    out = Tensor(std::make_shared<TensorImpl>(std::move(storage), std::move(sizes), std::move(strides),
                                              static_cast<int64_t>(storage_offset), dtype));
  } else {
    const uint64_t nbytes = u64();
    out = empty(sizes, dtype);
    EMBER_CHECK(nbytes == static_cast<uint64_t>(out.numel()) * element_size(dtype), op_, ": a malformed tensor (",
                nbytes, " bytes for ", out.numel(), " elements)");
    raw(out.data_ptr(), nbytes);
  }
  if (requires_grad) out.requires_grad_(true);
  return out;
}

}  // namespace ember::multiprocessing::detail
