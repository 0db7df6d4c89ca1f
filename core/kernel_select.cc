#include "core/kernel_select.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/error.h"

namespace ember::kernel_select {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Mode mode_from_environment() {
  const char* env = std::getenv("EMBER_KERNEL_SELECT");
  if (env == nullptr || *env == '\0') return Mode::Benchmark;
  const std::string value = env;
  if (value == "benchmark") return Mode::Benchmark;
  if (value == "heuristic") return Mode::Heuristic;
  EMBER_FAIL("EMBER_KERNEL_SELECT: expected benchmark or heuristic, got '", value, "'");
}

// -1: not set by set_mode.
std::atomic<int> mode_override{-1};

// The backend's description of the machine (set_machine_description), "" until one registers.
std::atomic<MachineDescription> machine_describer{nullptr};

std::string machine_description() {
  const MachineDescription describe = machine_describer.load();
  return describe != nullptr ? describe() : "";
}

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A file-name-safe digest of the description, so that one directory serves many machines.
std::string digest(const std::string& text) {
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(fnv1a(text)));
  return out;
}

std::optional<uint64_t> trial_seed_from_environment() {
  const char* env = std::getenv("EMBER_KERNEL_TRIAL_SEED");
  if (env == nullptr || *env == '\0') return std::nullopt;
  const std::string value = env;
  EMBER_CHECK(value.find_first_not_of("0123456789") == std::string::npos && value.size() <= 18,
              "EMBER_KERNEL_TRIAL_SEED: expected a non-negative integer, got '", value, "'");
  return std::stoull(value);
}

constexpr const char* kHeader = "ember kernel_select 1";

struct State {
  std::mutex mutex;
  std::vector<Decision> decisions;
  std::map<std::string, size_t> by_key;
  bool disk_loaded = false;
  std::map<std::string, std::string> disk;     // key -> candidate name
  std::map<std::string, std::string> adopted;  // key -> candidate name
  std::optional<uint64_t> trial_seed = trial_seed_from_environment();
  std::string forced = [] {
    const char* env = std::getenv("EMBER_KERNEL_FORCE");
    return std::string(env ? env : "");
  }();
  // Read on every kernel call, so outside the mutex.
  std::atomic<bool> forcing{!forced.empty()};
  std::atomic<bool> profiling{false};
  std::atomic<uint64_t> generation{0};
  std::map<std::string, std::pair<double, int64_t>> usage;  // key -> seconds, calls
};

State& state() {
  static State* s = new State;  // never destroyed: kernels may run during static destruction
  return *s;
}

std::string cache_path() {
  const char* dir = std::getenv("EMBER_KERNEL_CACHE");
  if (dir == nullptr || *dir == '\0') return "";
  return std::string(dir) + "/kernels-" + digest(machine_description()) + ".tsv";
}

// Lines after the header: KEY <tab> CANDIDATE. A malformed file is an Error naming it; a missing
// one is an empty cache.
std::map<std::string, std::string> read_cache(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  if (!in) return out;
  std::string line;
  std::getline(in, line);
  EMBER_CHECK(line.rfind(kHeader, 0) == 0, "kernel_select: the cache file ", path, " does not start with '", kHeader,
              "' (found '", line.substr(0, 40), "'); delete it or point EMBER_KERNEL_CACHE elsewhere");
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const auto tab = line.find('\t');
    EMBER_CHECK(tab != std::string::npos && tab > 0 && tab + 1 < line.size(), "kernel_select: line ", number,
                " of the cache file ", path, " is malformed: expected KEY<tab>CANDIDATE, found '", line.substr(0, 80),
                "'");
    out[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return out;
}

// Merges `entries` into the file through a temporary and a rename: a crash mid-write leaves the
// old file whole, and processes writing at once (DDP ranks) lose at most each other's additions.
void write_cache(const std::string& path, const std::map<std::string, std::string>& entries) {
  std::map<std::string, std::string> merged;
  try {
    merged = read_cache(path);
  } catch (const Error&) {
    // A damaged file is replaced by what this process knows.
  }
  for (const auto& [key, name] : entries) merged[key] = name;
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    EMBER_CHECK(static_cast<bool>(out), "kernel_select: cannot write the cache file ", temporary,
                " (EMBER_KERNEL_CACHE must name an existing, writable directory)");
    out << kHeader << " " << machine_description() << "\n";
    for (const auto& [key, name] : merged) out << key << "\t" << name << "\n";
    out.flush();
    EMBER_CHECK(static_cast<bool>(out), "kernel_select: writing the cache file ", temporary, " failed");
  }
  EMBER_CHECK(std::rename(temporary.c_str(), path.c_str()) == 0, "kernel_select: cannot rename ", temporary, " to ",
              path);
}

void load_disk_locked(State& s) {
  if (s.disk_loaded) return;
  const std::string path = cache_path();
  if (!path.empty()) s.disk = read_cache(path);  // a damaged file raises again at the next choice
  s.disk_loaded = true;
}

// One candidate's time: one untimed run (first-use costs: code generation, page faults), then the
// best of two.
double time_trial(const std::function<void(int)>& trial, int index) {
  trial(index);
  double best = 0;
  for (int run = 0; run < 2; ++run) {
    const double start = now_seconds();
    trial(index);
    const double seconds = now_seconds() - start;
    best = run == 0 ? seconds : std::min(best, seconds);
  }
  return best;
}

}  // namespace

Mode mode() {
  const int forced = mode_override.load();
  if (forced >= 0) return static_cast<Mode>(forced);
  static const Mode from_environment = mode_from_environment();
  return from_environment;
}

void set_mode(Mode m) { mode_override.store(static_cast<int>(m)); }

const char* mode_name(Mode m) { return m == Mode::Benchmark ? "benchmark" : "heuristic"; }

int choose(const std::string& key, const std::vector<std::string>& candidates, int heuristic,
           const std::function<void(int)>& trial) {
  EMBER_CHECK(heuristic >= 0 && heuristic < static_cast<int>(candidates.size()), "kernel_select: the heuristic pick ",
              heuristic, " for ", key, " is not one of its ", candidates.size(), " candidates");
  State& s = state();
  const Mode m = mode();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto found = s.by_key.find(key);
    if (found != s.by_key.end()) return s.decisions[found->second].chosen;
    Decision d;
    d.key = key;
    d.candidates = candidates;
    d.chosen = heuristic;
    d.how = "heuristic";
    bool decided = m == Mode::Heuristic || candidates.size() == 1;
    if (!s.forced.empty()) {
      const auto at = std::find(candidates.begin(), candidates.end(), s.forced);
      if (at != candidates.end()) {
        d.chosen = static_cast<int>(at - candidates.begin());
        d.how = "forced";
        decided = true;
      }
    }
    // An adopted decision, else the disk's, when its name is still a candidate.
    auto take = [&](const std::map<std::string, std::string>& names, const char* how) {
      auto named = names.find(key);
      if (decided || named == names.end()) return;
      const auto at = std::find(candidates.begin(), candidates.end(), named->second);
      if (at == candidates.end()) return;
      d.chosen = static_cast<int>(at - candidates.begin());
      d.how = how;
      decided = true;
    };
    take(s.adopted, "adopted");
    if (!decided) load_disk_locked(s);
    take(s.disk, "cached on disk");
    if (decided) {
      s.by_key.emplace(key, s.decisions.size());
      s.decisions.push_back(std::move(d));
      return s.decisions.back().chosen;
    }
  }
  // Trials run unlocked: they are whole kernel calls, and may themselves choose (a candidate that
  // runs a GEMM).
  Decision d;
  d.key = key;
  d.candidates = candidates;
  d.how = "measured";
  d.chosen = heuristic;
  double best = -1;
  for (int i = 0; i < static_cast<int>(candidates.size()); ++i) {
    double seconds = -1;
    try {
      seconds = time_trial(trial, i);
    } catch (const Error&) {
      seconds = -1;  // this candidate cannot take the problem after all
    }
    d.seconds.push_back(seconds);
    if (seconds >= 0 && (best < 0 || seconds < best)) {
      best = seconds;
      d.chosen = i;
    }
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.trial_seed && best >= 0) {
    std::vector<int> worked;
    for (int i = 0; i < static_cast<int>(d.seconds.size()); ++i)
      if (d.seconds[i] >= 0) worked.push_back(i);
    d.chosen = worked[(fnv1a(key) + *s.trial_seed) % worked.size()];
  }
  auto found = s.by_key.find(key);
  if (found != s.by_key.end()) return s.decisions[found->second].chosen;
  s.by_key.emplace(key, s.decisions.size());
  s.decisions.push_back(d);
  const std::string path = cache_path();
  if (!path.empty() && best >= 0) {
    s.disk[key] = candidates[d.chosen];
    write_cache(path, {{key, candidates[d.chosen]}});
  }
  return d.chosen;
}

std::vector<Decision> decisions() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.decisions;
}

size_t decision_count() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.decisions.size();
}

std::map<std::string, std::string> in_force() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::map<std::string, std::string> out;
  for (const Decision& d : s.decisions) out[d.key] = d.candidates[d.chosen];
  return out;
}

void adopt(const std::map<std::string, std::string>& decisions) {
  const bool benchmark = mode() == Mode::Benchmark;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  bool changed = false;
  for (const auto& [key, name] : decisions) {
    s.adopted[key] = name;
    auto found = s.by_key.find(key);
    if (!benchmark || found == s.by_key.end()) continue;
    Decision& d = s.decisions[found->second];
    const auto at = std::find(d.candidates.begin(), d.candidates.end(), name);
    if (d.how == "forced" || at == d.candidates.end()) continue;
    const int index = static_cast<int>(at - d.candidates.begin());
    changed = changed || index != d.chosen;
    d.chosen = index;
    d.how = "adopted";
  }
  if (changed) s.generation.fetch_add(1);  // the backends' Memos hold the old choices
}

void set_trial_seed(std::optional<uint64_t> seed) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.trial_seed = seed;
}

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.decisions.clear();
  s.by_key.clear();
  s.disk.clear();
  s.adopted.clear();
  s.disk_loaded = false;
  s.usage.clear();
  s.generation.fetch_add(1);
}

uint64_t generation() { return state().generation.load(); }

void force(const std::string& candidate) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.forced = candidate;
  s.forcing.store(!candidate.empty());
  s.decisions.clear();
  s.by_key.clear();
  s.generation.fetch_add(1);
}

void set_machine_description(MachineDescription describe) { machine_describer.store(describe); }

bool may_differ_from_heuristic() { return mode() == Mode::Benchmark || state().forcing.load(); }

std::string cache_file() { return cache_path(); }

void set_profiling(bool on) { state().profiling.store(on); }

bool profiling() { return state().profiling.load(); }

Timer::Timer(std::string key) : key_(std::move(key)) {
  if (profiling()) start_ = now_seconds();
}

Timer::~Timer() {
  if (start_ == 0) return;
  const double seconds = now_seconds() - start_;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto& entry = s.usage[key_];
  entry.first += seconds;
  entry.second += 1;
}

std::vector<Usage> usage() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<Usage> out;
  for (const auto& [key, totals] : s.usage) {
    Usage u;
    auto found = s.by_key.find(key);
    if (found != s.by_key.end()) u.decision = s.decisions[found->second];
    u.decision.key = key;
    u.seconds = totals.first;
    u.calls = totals.second;
    out.push_back(std::move(u));
  }
  std::sort(out.begin(), out.end(), [](const Usage& a, const Usage& b) { return a.seconds > b.seconds; });
  return out;
}

void clear_usage() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.usage.clear();
}

}  // namespace ember::kernel_select
