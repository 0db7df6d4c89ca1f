// Choosing among a backend's algorithms for one problem (a convolution pass of one shape, a GEMM
// shape) by timing them, as torch.backends.cudnn.benchmark does for cuDNN: which kernel wins
// depends on the CPU's caches and the GPU's generation, which fixed rules measured on one machine
// cannot see. Backend-neutral: a backend names its problem and candidates and says how to run one;
// this file decides, remembers and reports.
//
//   EMBER_KERNEL_SELECT=benchmark  (the default) the first call of a problem times every candidate
//                                  on its real data and the fastest is kept for the process
//   EMBER_KERNEL_SELECT=heuristic  the backend's fixed rule, with no trials: one path every run
//   EMBER_KERNEL_FORCE=NAME       runs the candidate NAME wherever it is one (see force())
//   EMBER_KERNEL_CACHE=DIR         keeps benchmark decisions in DIR, in a file named for this
//                                  machine (set_machine_description()), for the next process
//   EMBER_KERNEL_TRIAL_SEED=N      (tests) the trials' winner is drawn from N and the key, not from
//                                  their times (see set_trial_seed())
//
// set_mode() overrides the variable (the train tool's --deterministic asks for heuristic). Every
// candidate computes the same function; they differ in rounding only as much as the tests allow
// between paths. A decision is per process and key: the key names everything the backend thinks
// matters (pass, shapes, layout, dtype, and the thread count it will run with). Decisions can be
// handed on (in_force() / adopt()): a training checkpoint carries them, so that a resumed run runs
// the kernels of the run it continues, and DDP ranks take rank 0's (comm/kernel_agreement.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ember::kernel_select {

enum class Mode { Benchmark, Heuristic };

// The mode in force: set_mode's, else EMBER_KERNEL_SELECT's (read once), else Benchmark. A
// malformed variable raises ember::Error naming it.
Mode mode();
void set_mode(Mode mode);
const char* mode_name(Mode mode);

// One decision, for reports.
struct Decision {
  std::string key;
  std::vector<std::string> candidates;  // names, in the backend's order
  std::vector<double> seconds;          // each trial's time (negative: it failed); empty if not timed
  int chosen = 0;
  std::string how;  // "measured", "heuristic", "cached on disk", "adopted" or "forced"
};

// Returns the index of the candidate to run for `key`. On the key's first call in benchmark mode,
// an adopted decision (adopt()) is taken, else the disk cache's; failing both, `trial(i)` runs
// candidate i on real data; choose() times it (one untimed run, then the best of two) and keeps
// the fastest. A trial that throws drops its candidate; if all do, `heuristic`
// wins. In heuristic mode, or with one candidate, `heuristic` is returned without trials. Safe
// from any thread: two threads first meeting a key may both run trials, and the first decision
// stored is the one both keep.
int choose(const std::string& key, const std::vector<std::string>& candidates, int heuristic,
           const std::function<void(int)>& trial);

// Bumped by reset() and force(): Memo below drops its values when this changes.
uint64_t generation();

// A backend's own map from a key to what it made of the decision (an index turned into a
// ready-to-run option), so that a decided call costs one lookup. Dropped whenever reset() or
// force() change the decisions; the first value stored for a key is the one kept.
template <class T>
class Memo {
 public:
  std::optional<T> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation_ != generation()) {
      values_.clear();
      generation_ = generation();
    }
    auto found = values_.find(key);
    if (found == values_.end()) return std::nullopt;
    return found->second;
  }
  T store(const std::string& key, T value) {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.emplace(key, std::move(value)).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, T> values_;
  uint64_t generation_ = 0;
};

// Every decision this process made, in the order made.
std::vector<Decision> decisions();

// How many keys this process has decided (cheap: for noticing new decisions).
size_t decision_count();

// The decisions in force, key -> the chosen candidate's name: what a training checkpoint records.
std::map<std::string, std::string> in_force();

// Makes each entry (key -> candidate name) the decision for its key in benchmark mode, in place of
// the disk cache and the trials: a key already decided switches to it, a key not yet met takes it
// on its first call. A name that is not one of the key's candidates (a checkpoint from another CPU
// or build) leaves that key to be measured. A forced candidate and heuristic mode still win.
// Adopted decisions last until reset(); later calls add to them.
void adopt(const std::map<std::string, std::string>& decisions);

// Forgets the process's decisions, adopted ones included (tests; a later choose() trials again or
// reads the disk cache).
void reset();

// For tests that need two processes to decide differently (a resumed run that must adopt the
// decisions of the run it continues): trials still run, but the winner among the candidates whose
// trial worked is the ((FNV-1a hash of the key) + seed) mod count'th, so seeds s and s+1 disagree on
// every key with two or more such candidates. nullopt (the default, unless EMBER_KERNEL_TRIAL_SEED
// is set; a malformed value raises ember::Error naming it) picks by time.
void set_trial_seed(std::optional<uint64_t> seed);

// Runs `candidate` wherever it is one of the candidates (and the usual choice elsewhere); "" ends
// it. EMBER_KERNEL_FORCE sets it at start-up. For tests that must cover every kernel, and for
// finding which kernel misbehaves.
void force(const std::string& candidate);

// Whether choose() may pick other than the heuristic (benchmark mode, or a candidate forced): a
// backend lists its other candidates, and runs its trials, only then.
bool may_differ_from_heuristic();

// The disk cache file this process uses, or "" without EMBER_KERNEL_CACHE.
std::string cache_file();

// What makes a decision made on this machine valid on another run (the CPU's model, caches and
// ISA cap): it names the disk cache file and heads it. Core reads no hardware itself; the CPU
// backend registers core/cpu/cpu_info.h's machine_description() at start-up. Called afresh for
// every cache file name.
using MachineDescription = std::string (*)();
void set_machine_description(MachineDescription describe);

// Time spent per decision key while profiling is on (off by default; benchmarks turn it on).
// A backend brackets its call with a Timer; report() pairs each key's total with its decision.
void set_profiling(bool on);
bool profiling();
class Timer {
 public:
  explicit Timer(std::string key);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

 private:
  std::string key_;
  double start_ = 0;
};
struct Usage {
  Decision decision;
  double seconds = 0;  // profiled time since the last clear_usage()
  int64_t calls = 0;
};
std::vector<Usage> usage();
void clear_usage();

}  // namespace ember::kernel_select
