// The race record behind racecheck.h: per 4-byte word of shared memory, up to four recent accesses
// (thread, barrier interval, warp epoch, bytes, site) in a hash table that each new block empties
// by bumping a generation. One record per OS thread; a block runs on one OS thread throughout.
#include "cuda/emu/racecheck.h"

#include <link.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "cuda/emu/block.h"
#include "cuda/emu/host_backtrace.h"

namespace ember::emu::racecheck {

constinit thread_local BlockRecord* active = nullptr;

namespace {

constexpr int kCells = 4;

struct Cell {
  uint32_t phase = 0;       // the barrier interval (a stale one is over: a barrier ordered it)
  uint32_t warp_epoch = 0;  // its warp's count of completed warp operations at the access
  const void* site = nullptr;
  uint16_t thread = 0;
  uint8_t bytes = 0;  // bit i: byte i of the word; 0: an empty cell
  bool write = false;
};

struct Word {
  uintptr_t key = 0;        // address / 4
  uint32_t generation = 0;  // the block it belongs to: another block's is an empty slot
  uint8_t next_victim = 0;  // the cell to replace when all four hold live accesses
  std::array<Cell, kCells> cells;
};

struct Range {
  uintptr_t begin = 0, end = 0;
  bool contains(uintptr_t a) const { return a - begin < end - begin; }
};

template <class T>
Range range_of(const T& object) {
  const auto begin = reinterpret_cast<uintptr_t>(&object);
  return {begin, begin + sizeof(T)};
}

// This OS thread's instance of every loaded module's thread-local segment: `__shared__` is
// `static thread_local`, so each __shared__ variable lives in one of them.
std::vector<Range> thread_local_segments() {
  std::vector<Range> ranges;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_tls_data == nullptr) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          if (info->dlpi_phdr[i].p_type != PT_TLS) continue;
          const auto begin = reinterpret_cast<uintptr_t>(info->dlpi_tls_data);
          static_cast<std::vector<Range>*>(data)->push_back({begin, begin + info->dlpi_phdr[i].p_memsz});
        }
        return 0;
      },
      &ranges);
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<Range> merged;  // modules' segments are packed, with alignment gaps only
  for (const Range& r : ranges) {
    if (!merged.empty() && r.begin <= merged.back().end + 64)
      merged.back().end = std::max(merged.back().end, r.end);
    else
      merged.push_back(r);
  }
  return merged;
}

}  // namespace

struct BlockRecord {
  std::vector<Range> tls;
  // The emulator's own thread-locals, which the kernels' inlined thread loop writes (block.h).
  std::array<Range, 3> emulator;
  Range dynamic;
  uint32_t phase = 0;
  uint32_t generation = 0;
  std::vector<Word> table = std::vector<Word>(1024);
  size_t used = 0;
  std::vector<uint32_t> warp_epoch;  // per warp: warp operations completed
  std::vector<uint32_t> lane_sync;   // per thread: its warp's epoch after the last one it took part in
  Race race;

  BlockRecord()
      : tls(thread_local_segments()),
        emulator{range_of(plain_calls), range_of(current_thread), range_of(current_block)} {}

  bool in_shared_memory(uintptr_t a) const {
    if (dynamic.contains(a)) return true;
    for (const Range& r : tls) {
      if (!r.contains(a)) continue;
      for (const Range& own : emulator)
        if (own.contains(a)) return false;
      return true;
    }
    return false;
  }

  Word& word(uintptr_t key) {
    if ((used + 1) * 2 > table.size()) grow();
    const size_t mask = table.size() - 1;
    for (size_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & mask;; i = (i + 1) & mask) {
      Word& w = table[i];
      if (w.generation != generation) {
        w.key = key;
        w.generation = generation;
        w.next_victim = 0;
        for (Cell& c : w.cells) c.bytes = 0;
        ++used;
        return w;
      }
      if (w.key == key) return w;
    }
  }

  void grow() {
    std::vector<Word> old(table.size() * 2);
    old.swap(table);
    const size_t mask = table.size() - 1;
    for (const Word& w : old) {
      if (w.generation != generation) continue;
      size_t i = (w.key * 0x9E3779B97F4A7C15ull) >> 20 & mask;
      while (table[i].generation == generation) i = (i + 1) & mask;
      table[i] = w;
    }
  }

  // Two lanes of one warp are ordered when both took part in a warp operation after the earlier access.
  bool ordered_in_warp(const Cell& earlier, unsigned thread) const {
    return earlier.thread / 32 == thread / 32 && lane_sync[earlier.thread] > earlier.warp_epoch &&
           lane_sync[thread] > earlier.warp_epoch;
  }

  void touch(uintptr_t address, uint8_t bytes, bool write, unsigned thread, const void* site) {
    Word& w = word(address >> 2);
    Cell* reuse = nullptr;
    for (Cell& c : w.cells) {
      if (c.bytes == 0 || c.phase != phase) {
        if (reuse == nullptr) reuse = &c;
        continue;
      }
      if (c.thread == thread) {
        // The same access again, or a read that this write covers (a write conflicts with all a read does).
        if ((c.write == write && c.bytes == bytes) || (write && !c.write && (c.bytes & ~bytes) == 0)) reuse = &c;
        continue;
      }
      if ((c.bytes & bytes) == 0 || !(c.write || write) || ordered_in_warp(c, thread)) continue;
      race = {true,
              c.thread,
              thread,
              c.write,
              write,
              c.site,
              site,
              dynamic.contains(address),
              dynamic.contains(address) ? address - dynamic.begin : 0};
      return;
    }
    if (reuse == nullptr) {
      for (Cell& c : w.cells)
        if (c.thread == thread) reuse = &c;  // keep other threads' accesses rather than this one's older
    }
    if (reuse == nullptr) reuse = &w.cells[w.next_victim++ % kCells];
    *reuse = {phase, warp_epoch[thread / 32], site, static_cast<uint16_t>(thread), bytes, write};
  }
};

namespace {

thread_local BlockRecord* this_thread_record = nullptr;

BlockRecord& record_of_this_thread() {
  if (this_thread_record == nullptr) this_thread_record = new BlockRecord();  // kept for the thread's life
  return *this_thread_record;
}

}  // namespace

void begin_block(unsigned threads, const void* dynamic_shared, size_t dynamic_bytes) {
  BlockRecord& b = record_of_this_thread();
  if (++b.generation == 0) {  // wrapped: every slot's generation may look current
    for (Word& w : b.table) w.generation = 0;
    b.generation = 1;
  }
  b.used = 0;
  b.phase = 0;
  b.warp_epoch.assign((threads + 31) / 32, 0);
  b.lane_sync.assign(threads, 0);
  const auto begin = reinterpret_cast<uintptr_t>(dynamic_shared);
  b.dynamic = {begin, begin + dynamic_bytes};
  b.race = {};
  active = &b;
}

void barrier_passed() {
  if (active != nullptr) ++active->phase;
}

void warp_synchronised(unsigned first, unsigned mask) {
  BlockRecord* b = active;
  if (b == nullptr) return;
  const uint32_t epoch = ++b->warp_epoch[first / 32];
  for (unsigned lane = 0; lane < 32 && first + lane < b->lane_sync.size(); ++lane)
    if (mask >> lane & 1u) b->lane_sync[first + lane] = epoch;
}

Race end_block() {
  BlockRecord* b = active;
  active = nullptr;
  return b != nullptr ? b->race : Race{};
}

void record(BlockRecord& b, uintptr_t address, size_t bytes, bool write, const void* site) {
  if (b.race.found || !b.in_shared_memory(address)) return;
  const PlainCallLoop& loop = plain_calls;
  const auto thread = static_cast<unsigned>((reinterpret_cast<const char*>(loop.running) - loop.slots) / loop.stride);
  const uintptr_t end = address + bytes;
  for (uintptr_t word = address & ~uintptr_t{3}; word < end && !b.race.found; word += 4) {
    const unsigned low = static_cast<unsigned>(std::max(address, word) - word);
    const unsigned high = static_cast<unsigned>(std::min(end, word + 4) - word);
    b.touch(word, static_cast<uint8_t>((1u << high) - (1u << low)), write, thread, site);
  }
}

namespace {

struct Copies {
  std::mutex mutex;
  std::map<std::string, ThreadLoop> loops;  // null: registered twice, by different copies
};

Copies& copies() {
  static Copies* registry = new Copies();  // libraries register during static initialisation
  return *registry;
}

}  // namespace

void register_copy(const std::string& key, ThreadLoop run_threads) {
  Copies& c = copies();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto [it, added] = c.loops.emplace(key, run_threads);
  if (!added && it->second != run_threads) it->second = nullptr;
}

ThreadLoop registered_copy(const std::string& key) {
  Copies& c = copies();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.loops.find(key);
  return it == c.loops.end() ? nullptr : it->second;
}

std::string source_line(const void* return_address) {
  struct Lookup {
    uintptr_t pc;
    std::string module;
    uintptr_t offset = 0;
  } lookup{reinterpret_cast<uintptr_t>(return_address) - 1, "", 0};  // inside the call instruction
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* l = static_cast<Lookup*>(data);
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& p = info->dlpi_phdr[i];
          const uintptr_t begin = info->dlpi_addr + p.p_vaddr;
          if (p.p_type != PT_LOAD || l->pc - begin >= p.p_memsz) continue;
          l->module = info->dlpi_name[0] != '\0' ? info->dlpi_name : "/proc/self/exe";
          l->offset = l->pc - info->dlpi_addr;
          return 1;
        }
        return 0;
      },
      &lookup);
  if (lookup.module.empty()) return "an unknown address";
  char offset[32];
  std::snprintf(offset, sizeof offset, "0x%zx", static_cast<size_t>(lookup.offset));
  const std::string fallback = lookup.module + "+" + offset;
  // -i: the innermost inlined frame (kernels are inlined into the launch's thread loop) comes first.
  std::string text = addr2line(lookup.module, lookup.offset, "-i");
  text = text.substr(0, text.find(' '));  // drops " (discriminator N)"
  if (text.empty() || text[0] == '?' || text.find(":?") != std::string::npos) return fallback;
  // The compiler's working directory, a Bazel execution root: the path from the workspace is enough.
  const size_t root = text.find("/execroot/");
  if (root != std::string::npos) {
    const size_t workspace_end = text.find('/', root + std::strlen("/execroot/"));
    if (workspace_end != std::string::npos) text = text.substr(workspace_end + 1);
  }
  return text;
}

}  // namespace ember::emu::racecheck
