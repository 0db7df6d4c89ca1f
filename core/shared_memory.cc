// memfd segments, the per-process registry that maps each segment once, and the packing of
// storages into segments.
#include "core/shared_memory.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_set>

#include "core/error.h"

namespace ember::shm {

namespace {

constexpr size_t kAlign = 64;
constexpr size_t kFirstChunk = size_t{1} << 20;
constexpr size_t kLargestChunk = size_t{64} << 20;

size_t align_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::string bytes_text(size_t n) {
  std::ostringstream out;
  out.precision(3);
  if (n >= (size_t{1} << 30)) {
    out << static_cast<double>(n) / (1 << 30) << " GiB";
  } else if (n >= (size_t{1} << 20)) {
    out << static_cast<double>(n) / (1 << 20) << " MiB";
  } else {
    out << n << " bytes";
  }
  out << " (" << n << " bytes)";
  return out.str();
}

// What the machine (or this process's memory cgroup) can still give, in bytes; 0 if unknown.
size_t memory_available() {
  size_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t value = 0;
  std::string unit;
  while (meminfo >> key >> value) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") {
      available = value * 1024;
      break;
    }
  }
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroup, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string dir = "/sys/fs/cgroup" + line.substr(3);
    std::ifstream max_file(dir + "/memory.max"), current_file(dir + "/memory.current");
    std::string max_text;
    size_t current = 0;
    if (max_file >> max_text && max_text != "max" && current_file >> current) {
      const size_t max = std::stoull(max_text);
      const size_t left = max > current ? max - current : 0;
      if (available == 0 || left < available) available = left;
    }
  }
  return available;
}

struct Registry {
  std::mutex mu;
  std::map<uint64_t, std::weak_ptr<Segment>> segments;
  std::map<std::tuple<uint64_t, size_t, size_t>, std::weak_ptr<StorageImpl>> storages;
  size_t storages_after_sweep = 0;
  // The segment small shares are packed into, and how much of it is used. Weak: a chunk goes
  // back to the kernel with its last tensor.
  std::weak_ptr<Segment> current;
  size_t used = 0;
  size_t next_chunk = kFirstChunk;
};

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: segments may die during static destruction
  return *r;
}

[[noreturn]] void fail_errno(const char* op, const char* step, size_t nbytes, int err) {
  std::string cause = std::strerror(err);
  if (err == ENOSPC || err == ENOMEM) cause += ": the machine (or this process's memory cgroup) is out of memory";
  if (err == EFBIG) cause += ": the file-size limit (ulimit -f) is below it";
  if (err == EMFILE || err == ENFILE) cause += ": too many open files (ulimit -n)";
  EMBER_FAIL(op, ": cannot create ", bytes_text(nbytes), " of shared memory (", step, " failed: ", cause, ")");
}

}  // namespace

std::shared_ptr<Segment> Segment::create(size_t nbytes, const char* op) {
  nbytes = align_up(nbytes == 0 ? 1 : nbytes, static_cast<size_t>(sysconf(_SC_PAGESIZE)));
  const size_t available = memory_available();
  if (available != 0 && nbytes > available) {
    EMBER_FAIL(op, ": cannot create ", bytes_text(nbytes), " of shared memory: only ", bytes_text(available),
               " of memory is available");
  }
  // Left at its default, SIGXFSZ would kill the process where the file-size limit stops the
  // segment; ignored, the limit is an EFBIG this function reports.
  struct sigaction old {};
  if (sigaction(SIGXFSZ, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) signal(SIGXFSZ, SIG_IGN);
  const int fd = memfd_create("ember-shared", MFD_CLOEXEC);
  if (fd < 0) fail_errno(op, "memfd_create", nbytes, errno);
  auto give_up = [&](const char* step) {
    const int err = errno;
    close(fd);
    fail_errno(op, step, nbytes, err);
  };
  if (ftruncate(fd, static_cast<off_t>(nbytes)) != 0) give_up("ftruncate");
  // Reserving every page now turns a full machine into this error instead of a SIGBUS when a
  // process first writes a page.
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(nbytes)); err != 0) {
    errno = err;
    give_up("fallocate");
  }
  void* base = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) give_up("mmap");
  struct stat st {};
  fstat(fd, &st);
  std::shared_ptr<Segment> segment(new Segment(fd, static_cast<char*>(base), nbytes, st.st_ino));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.segments[segment->id()] = segment;
  return segment;
}

std::shared_ptr<Segment> Segment::attach(int fd, const char* op) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    EMBER_FAIL(op, ": a received shared-memory descriptor is unusable (fstat: ", std::strerror(err), ")");
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto it = r.segments.find(st.st_ino); it != r.segments.end()) {
    if (auto alive = it->second.lock()) {
      close(fd);
      return alive;
    }
  }
  const size_t nbytes = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    EMBER_FAIL(op, ": cannot map a received shared-memory segment of ", bytes_text(nbytes), " (", std::strerror(err),
               ")");
  }
  // FD_CLOEXEC travels with the descriptor only as a flag of this process's table entry.
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  std::shared_ptr<Segment> segment(new Segment(fd, static_cast<char*>(base), nbytes, st.st_ino));
  r.segments[segment->id()] = segment;
  return segment;
}

Segment::~Segment() {
  munmap(base_, size_);
  close(fd_);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto it = r.segments.find(id_); it != r.segments.end() && it->second.expired()) r.segments.erase(it);
}

size_t live_segments() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  size_t n = 0;
  for (const auto& [id, weak] : r.segments) n += weak.expired() ? 0 : 1;
  return n;
}

namespace {

void check_movable(const StorageImpl& storage, const char* op) {
  EMBER_CHECK(storage.device().type == kCPU, op, ": only CPU tensors can be moved to shared memory, got a tensor on ",
              storage.device(), " (CUDA memory is not shared between processes; copy it to the CPU first)");
}

}  // namespace

void move_to_shared(StorageImpl& storage, const char* op) {
  check_movable(storage, op);
  if (storage.shared_segment() != nullptr) return;
  const size_t need = align_up(storage.nbytes(), kAlign);
  Registry& r = registry();
  std::shared_ptr<Segment> segment;
  size_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto current = r.current.lock();
    if (current != nullptr && current->size() - r.used >= need) {
      segment = std::move(current);
      offset = r.used;
      r.used += need;
    }
  }
  if (segment == nullptr) {
    // Chunks grow geometrically so that many small shares take few descriptors, and one small
    // share does not reserve the largest chunk.
    size_t chunk;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      chunk = std::max(need, r.next_chunk);
      r.next_chunk = std::min(r.next_chunk * 2, kLargestChunk);
    }
    segment = Segment::create(chunk, op);
    std::lock_guard<std::mutex> lock(r.mu);
    r.current = segment;
    r.used = need;
  }
  storage.adopt_shared(std::move(segment), offset);
}

void move_to_shared(const std::vector<StorageImpl*>& storages, const char* op) {
  std::vector<StorageImpl*> todo;
  std::unordered_set<StorageImpl*> seen;
  size_t total = 0;
  for (StorageImpl* s : storages) {
    check_movable(*s, op);
    if (s->shared_segment() != nullptr || !seen.insert(s).second) continue;
    todo.push_back(s);
    total += align_up(s->nbytes(), kAlign);
  }
  if (todo.empty()) return;
  if (todo.size() == 1) {
    move_to_shared(*todo[0], op);
    return;
  }
  auto segment = Segment::create(total, op);
  size_t offset = 0;
  for (StorageImpl* s : todo) {
    s->adopt_shared(segment, offset);
    offset += align_up(s->nbytes(), kAlign);
  }
}

Storage storage_in(const std::shared_ptr<Segment>& segment, size_t offset, size_t nbytes) {
  EMBER_CHECK(offset <= segment->size() && nbytes <= segment->size() - offset,
              "shared memory: a received tensor spans bytes [", offset, ", ", offset + nbytes, ") of a segment of ",
              segment->size(), " bytes");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto& slot = r.storages[{segment->id(), offset, nbytes}];
  if (auto alive = slot.lock()) {
    if (alive->shared_segment() == segment) return alive;
  }
  auto storage = StorageImpl::in_segment(segment, offset, nbytes);
  slot = storage;
  // Received tensors come and go for a whole run: forget the dead ones now and then.
  if (r.storages.size() > 2 * r.storages_after_sweep + 1024) {
    for (auto it = r.storages.begin(); it != r.storages.end();) {
      it = it->second.expired() ? r.storages.erase(it) : std::next(it);
    }
    r.storages_after_sweep = r.storages.size();
  }
  return storage;
}

}  // namespace ember::shm
