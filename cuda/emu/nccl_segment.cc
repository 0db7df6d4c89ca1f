// Creating, attaching and waiting in a communicator's shared memory. Waiters sleep on one futex
// word that every change bumps: a shared (not process-private) futex, so the same wait works
// between threads and between processes.
#include "cuda/emu/nccl_segment.h"

#include <signal.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "cuda/emu/nccl_rendezvous.h"

namespace ember::emu::nccl {

namespace {

constexpr uint32_t kMagic = 0x4e43434c;  // "NCCL"
constexpr size_t kLine = 64;
constexpr size_t kDefaultChunkBytes = 64 << 10;
constexpr char kIdMagic[8] = {'e', 'm', 'b', 'e', 'r', 'i', 'd', '1'};
// A rank that never calls ncclCommInitRank would hold the others forever; the bound ends a crashed
// launch with an error and releases the id's name.
constexpr auto kJoinTimeout = std::chrono::seconds(300);

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "the segment's atomics must work between processes");

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// EMBER_EMU_NCCL_CHUNK_BYTES: the staging chunk (tests make it small so that small buffers
// cross many chunks). Every collective chunk must hold an element per rank.
size_t chunk_bytes_for(int nranks) {
  size_t bytes = kDefaultChunkBytes;
  if (const char* env = std::getenv("EMBER_EMU_NCCL_CHUNK_BYTES"); env && *env) bytes = std::strtoull(env, nullptr, 10);
  return round_up(std::max<size_t>({bytes, 1024, static_cast<size_t>(nranks) * 64}), kLine);
}

long futex(const std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), op, value, timeout, nullptr, 0);
}

// A zombie (exited, not yet reaped by its parent) is gone too.
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char state = 0;
  const int fields = std::fscanf(f, "%*d (%*[^)]) %c", &state);
  std::fclose(f);
  return fields == 1 && (state == 'Z' || state == 'X');
}

std::string system_error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

struct Segment::Control {
  std::atomic<uint32_t> ready;
  uint32_t magic;
  int32_t nranks;
  uint32_t unused;
  uint64_t bytes, chunk_bytes, key;
  std::atomic<uint32_t> joined;
  std::atomic<uint32_t> wake;  // the futex word: bumped at every change
  std::atomic<uint32_t> waiters;
  std::atomic<uint32_t> failed;  // 0 healthy, 1 the reason is being written, 2 failed
  int32_t failure_result;
  std::atomic<uint32_t> barrier_count, barrier_generation;
  char reason[1024];
};

namespace {

struct Layout {
  size_t ranks, staging, channels, channel_stride, total;
};

Layout layout(int nranks, size_t chunk_bytes) {
  const size_t r = static_cast<size_t>(nranks);
  Layout l;
  l.ranks = round_up(sizeof(Segment::Control), kLine);
  l.staging = round_up(l.ranks + r * sizeof(RankSlot), kLine);
  l.channels = l.staging + r * 2 * chunk_bytes;
  l.channel_stride = kLine + 2 * (kLine + chunk_bytes);
  l.total = l.channels + r * r * l.channel_stride;
  return l;
}

Segment::Control& initialise(void* base, int nranks, size_t bytes, size_t chunk_bytes) {
  auto& c = *new (base) Segment::Control();
  c.magic = kMagic;
  c.nranks = nranks;
  c.bytes = bytes;
  c.chunk_bytes = chunk_bytes;
  ::getrandom(&c.key, sizeof(c.key), 0);
  return c;
}

}  // namespace

Segment::Segment(char* base, size_t bytes) : base_(base), bytes_(bytes) {}

Segment::~Segment() { ::munmap(base_, bytes_); }

Segment::Control& Segment::control() const { return *reinterpret_cast<Control*>(base_); }

void Segment::set_layout() {
  nranks_ = control().nranks;
  chunk_bytes_ = control().chunk_bytes;
  const Layout l = layout(nranks_, chunk_bytes_);
  ranks_offset_ = l.ranks;
  staging_offset_ = l.staging;
  channels_offset_ = l.channels;
  channel_stride_ = l.channel_stride;
}

std::shared_ptr<Segment> Segment::create_private(const std::vector<int>& devices) {
  const int nranks = static_cast<int>(devices.size());
  const size_t chunk = chunk_bytes_for(nranks);
  const Layout l = layout(nranks, chunk);
  void* p = ::mmap(nullptr, l.total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  std::shared_ptr<Segment> s(new Segment(static_cast<char*>(p), l.total));
  Control& c = initialise(p, nranks, l.total, chunk);
  s->set_layout();
  for (int r = 0; r < nranks; ++r) {
    RankSlot& slot = s->rank_slot(r);
    slot.claimed.store(1);
    slot.device = devices[static_cast<size_t>(r)];
    slot.pid = ::getpid();
  }
  c.joined.store(static_cast<uint32_t>(nranks));
  c.ready.store(1, std::memory_order_release);
  return s;
}

bool Segment::new_id(ncclUniqueId* id) {
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, kIdMagic, sizeof(kIdMagic));
  return ::getrandom(id->internal + sizeof(kIdMagic), 16, 0) == 16;
}

std::string Segment::name_for(const ncclUniqueId& id) {
  if (std::memcmp(id.internal, kIdMagic, sizeof(kIdMagic)) != 0) return "";
  static const char* digits = "0123456789abcdef";
  std::string name = "ember_nccl_";
  for (size_t i = sizeof(kIdMagic); i < sizeof(kIdMagic) + 16; ++i) {
    const auto byte = static_cast<unsigned char>(id.internal[i]);
    name += digits[byte >> 4];
    name += digits[byte & 15];
  }
  return name;
}

std::shared_ptr<Segment> Segment::attach(const std::string& name, int nranks, int rank, int device,
                                         ncclResult_t* result, std::string* error) {
  *result = ncclSystemError;
  const auto deadline = std::chrono::steady_clock::now() + kJoinTimeout;
  // The first rank to claim the id's name creates the memory; the others receive it from that rank.
  std::unique_ptr<Rendezvous> rendezvous;
  int fd = -1;
  while (true) {
    bool taken = false, absent = false;
    rendezvous = Rendezvous::claim(name, &taken, error);
    if (rendezvous || !taken) break;
    fd = receive_memory(name, deadline, &absent, error);
    // Absent: the holder let the name go between this rank's claim and its connect (or has bound
    // it and not yet listens).
    if (fd >= 0 || !absent || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool creator = rendezvous != nullptr;
  if (!creator && fd < 0) return nullptr;
  size_t bytes = 0;
  const size_t chunk = chunk_bytes_for(nranks);
  if (creator) {
    fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
    if (fd < 0) return *error = system_error("memfd_create"), nullptr;
    bytes = layout(nranks, chunk).total;
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      *error = system_error("ftruncate");
      ::close(fd);
      return nullptr;
    }
  } else {
    struct stat st {};
    if (::fstat(fd, &st) == 0) bytes = static_cast<size_t>(st.st_size);
  }
  void* p = bytes > 0 ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (p == MAP_FAILED) {
    *error = system_error("mmap of the communicator's memory");
    ::close(fd);
    return nullptr;
  }
  std::shared_ptr<Segment> s(new Segment(static_cast<char*>(p), bytes));
  Control& c = creator ? initialise(p, nranks, bytes, chunk) : s->control();
  if (creator) {
    c.ready.store(1, std::memory_order_release);
    const bool serving = rendezvous->serve(fd, error);  // owns fd from here
    s->rendezvous_ = std::move(rendezvous);
    if (!serving) return nullptr;
  } else {
    ::close(fd);  // the mapping keeps the memory
    if (c.ready.load(std::memory_order_acquire) == 0 || c.magic != kMagic || c.bytes != bytes) {
      *error = "the memory received for " + name + " was not set up by the emulated NCCL";
      return nullptr;
    }
  }
  s->set_layout();
  *result = ncclInvalidUsage;
  if (nranks != s->nranks()) {
    *error = "rank " + std::to_string(rank) + " passed nranks " + std::to_string(nranks) +
             " to ncclCommInitRank, "
             "but the communicator was created with nranks " +
             std::to_string(s->nranks());
    s->fail(ncclInvalidUsage, *error);
    return nullptr;
  }
  RankSlot& slot = s->rank_slot(rank);
  uint32_t unclaimed = 0;
  if (!slot.claimed.compare_exchange_strong(unclaimed, 1)) {
    *error = "two ranks called ncclCommInitRank as rank " + std::to_string(rank);
    s->fail(ncclInvalidUsage, *error);
    return nullptr;
  }
  slot.device = device;
  slot.pid = ::getpid();
  c.joined.fetch_add(1, std::memory_order_acq_rel);
  s->notify();
  *result = ncclSuccess;
  return s;
}

ncclResult_t Segment::wait_joined(std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() + kJoinTimeout;
  Control& c = control();
  while (true) {
    const uint32_t seen = snapshot();
    if (failed()) break;
    const uint32_t joined = c.joined.load(std::memory_order_acquire);
    if (joined == static_cast<uint32_t>(nranks_)) break;
    if (std::chrono::steady_clock::now() > deadline) {
      fail(ncclSystemError, "only " + std::to_string(joined) + " of " + std::to_string(nranks_) +
                                " ranks called ncclCommInitRank within " +
                                std::to_string(std::chrono::seconds(kJoinTimeout).count()) + " s");
      break;
    }
    wait(seen);
  }
  // Every rank has the memory mapped (or never will): the creator stops handing it out, and the
  // id's name is free again.
  rendezvous_.reset();
  if (!failed()) {
    for (int a = 0; a < nranks_; ++a)
      for (int b = a + 1; b < nranks_; ++b)
        if (rank_slot(a).device == rank_slot(b).device)
          fail(ncclInvalidUsage, "ranks " + std::to_string(a) + " and " + std::to_string(b) +
                                     " both use cuda:" + std::to_string(rank_slot(a).device) +
                                     " (NCCL: \"Duplicate GPU detected\"): call cudaSetDevice with each rank's own "
                                     "device (e.g. its local rank) before ncclCommInitRank");
  }
  if (!failed()) return ncclSuccess;
  *error = failure_reason();
  return failure_result();
}

void Segment::depart(int rank) {
  rank_slot(rank).departed.store(1, std::memory_order_release);
  notify();
}

std::string Segment::absence(int rank, ncclResult_t* result) {
  const RankSlot& slot = rank_slot(rank);
  const std::string who = "rank " + std::to_string(rank) + " (cuda:" + std::to_string(slot.device) + ", pid " +
                          std::to_string(slot.pid) + ")";
  if (slot.departed.load(std::memory_order_acquire) != 0) {
    *result = ncclInvalidUsage;
    return who + " destroyed its communicator";
  }
  if (slot.pid == ::getpid() || !process_gone(static_cast<pid_t>(slot.pid))) return "";
  *result = ncclRemoteError;  // NCCL's word for a peer whose process ended
  return who + " exited without destroying its communicator";
}

uint64_t Segment::key() const { return control().key; }

RankSlot& Segment::rank_slot(int rank) { return reinterpret_cast<RankSlot*>(base_ + ranks_offset_)[rank]; }

char* Segment::staging(int rank, int buffer) {
  return base_ + staging_offset_ + (static_cast<size_t>(rank) * 2 + static_cast<size_t>(buffer)) * chunk_bytes_;
}

char* Segment::channel_base(int from, int to) {
  return base_ + channels_offset_ +
         (static_cast<size_t>(from) * static_cast<size_t>(nranks_) + static_cast<size_t>(to)) * channel_stride_;
}

Channel& Segment::channel(int from, int to) { return *reinterpret_cast<Channel*>(channel_base(from, to)); }

ChunkHeader& Segment::chunk_header(int from, int to, uint64_t chunk) {
  return *reinterpret_cast<ChunkHeader*>(channel_base(from, to) + kLine + (chunk % 2) * (kLine + chunk_bytes_));
}

char* Segment::chunk_data(int from, int to, uint64_t chunk) {
  return reinterpret_cast<char*>(&chunk_header(from, to, chunk)) + kLine;
}

uint32_t Segment::snapshot() const { return control().wake.load(); }

void Segment::wait(uint32_t seen) const {
  Control& c = control();
  c.waiters.fetch_add(1);
  // Bounded, so that a lost wake-up (a peer process killed mid-notify) costs a moment, not a hang.
  const timespec timeout{0, 200 * 1000 * 1000};
  futex(&c.wake, FUTEX_WAIT, seen, &timeout);
  c.waiters.fetch_sub(1);
}

void Segment::notify() {
  Control& c = control();
  c.wake.fetch_add(1);
  if (c.waiters.load() > 0) futex(&c.wake, FUTEX_WAKE, INT_MAX, nullptr);
}

void Segment::fail(ncclResult_t result, const std::string& reason) {
  Control& c = control();
  uint32_t healthy = 0;
  if (c.failed.compare_exchange_strong(healthy, 1)) {
    const size_t n = std::min(reason.size(), sizeof(c.reason) - 1);
    std::memcpy(c.reason, reason.data(), n);
    c.reason[n] = '\0';
    c.failure_result = result;
    c.failed.store(2, std::memory_order_release);
  }
  notify();
}

bool Segment::failed() const { return control().failed.load(std::memory_order_acquire) != 0; }

ncclResult_t Segment::failure_result() const {
  while (control().failed.load(std::memory_order_acquire) == 1) std::this_thread::yield();
  return static_cast<ncclResult_t>(control().failure_result);
}

std::string Segment::failure_reason() const {
  while (control().failed.load(std::memory_order_acquire) == 1) std::this_thread::yield();
  return control().reason;
}

uint32_t Segment::arrive() {
  Control& c = control();
  // Read before arriving: the generation cannot move on until this rank has arrived.
  const uint32_t generation = c.barrier_generation.load(std::memory_order_acquire);
  if (c.barrier_count.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(nranks_)) {
    c.barrier_count.store(0, std::memory_order_relaxed);
    c.barrier_generation.store(generation + 1, std::memory_order_release);
    notify();
  }
  return generation + 1;
}

bool Segment::passed(uint32_t ticket) const {
  return static_cast<int32_t>(control().barrier_generation.load(std::memory_order_acquire) - ticket) >= 0;
}

}  // namespace ember::emu::nccl
