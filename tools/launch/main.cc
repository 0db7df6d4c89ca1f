// `launch`: runs a training job under mpirun (or srun under Slurm) and restarts it from its newest
// checkpoint when it fails, as torchrun --max-restarts does; with --min-hosts, leaves out the hosts
// that no longer answer and restarts at the smaller world size. See docs/DISTRIBUTED.md, "Restarts".
//
//   launch --max-restarts 3 --hostfile hosts --min-hosts 1 -- train --checkpoint-dir ck --epochs 30
//
// What ends the job for good: success; bad flags (exit status 2) or a missing/unreadable dataset
// (66), which a restart would meet again; Ctrl-C or SIGTERM to the launcher; running out of
// restarts (counted for the whole job, whichever host failed); fewer than --min-hosts answering.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "tools/launch/child.h"
#include "tools/launch/hosts.h"
#include "tools/launch/job.h"
#include "tools/launch/restart_log.h"
#include "tools/train/checkpoint_files.h"
#include "tools/train/flags.h"
#include "tools/train/trainer.h"

namespace {

using namespace ember::launch;
using ember::train::FlagError;
using ember::train::Flags;

Flags make_flags() {
  Flags f("launch",
          "Runs a training job (the program and flags after --) under mpirun, or srun inside a Slurm allocation, and\n"
          "restarts it with --resume latest when it fails. The program must write checkpoints (--checkpoint-dir).");
  f.add_int("max-restarts", 0, "restarts for the whole job, whichever host failed");
  f.add_string("hostfile", "", "Open MPI hostfile (NAME slots=N per line); without it the job runs on this host");
  f.add_int("np", 1, "processes on this host, without --hostfile (with it: the hosts' slots)", 1);
  f.add_int("min-hosts", 0,
            "before each restart, probe every host and run on those that answer, as long as at least this many "
            "do (0: restart on the same hosts)");
  f.add_double("backoff", 5, "seconds to wait before the first restart, doubled for each later one (at most 60)");
  f.add_double("probe-timeout", 30, "seconds a host has to start a process before it counts as gone", 1);
  f.add_string("launcher", "auto", "how to start the job (auto: srun inside a Slurm allocation, else mpirun)",
               {"auto", "mpirun", "srun"});
  f.add_string("launcher-args", "", "more arguments for mpirun or srun, space-separated");
  return f;
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool has_checkpoint(const std::string& dir) {
  if (dir.empty()) return false;
  try {
    ember::train::latest_checkpoint(dir);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// The step of the newest checkpoint (where a restart resumes), or 0.
int64_t checkpoint_step(const std::string& dir) {
  if (!has_checkpoint(dir)) return 0;
  try {
    return ember::train::read_checkpoint_state(ember::train::latest_checkpoint(dir)).step;
  } catch (const std::exception&) {
    return 0;
  }
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags = make_flags();
  JobSpec spec;
  int max_restarts = 0, min_hosts = 0;
  double backoff = 0, probe_timeout = 0;
  std::vector<Host> all_hosts;
  try {
    int split = 1;
    while (split < argc && std::string(argv[split]) != "--") ++split;
    if (!flags.parse(split, argv)) {
      std::printf("%s", flags.help_text().c_str());
      std::printf("\nusage: launch [flags] -- PROGRAM [PROGRAM FLAGS...]\n");
      return 0;
    }
    for (int i = split + 1; i < argc; ++i) spec.program.push_back(argv[i]);
    if (spec.program.empty()) throw FlagError("no program to run: give it after --, e.g. -- train --checkpoint-dir ck");
    max_restarts = static_cast<int>(flags.get_int("max-restarts"));
    min_hosts = static_cast<int>(flags.get_int("min-hosts"));
    backoff = flags.get_double("backoff");
    probe_timeout = flags.get_double("probe-timeout");
    const std::string launcher = flags.get_string("launcher");
    spec.slurm =
        launcher == "srun" || (launcher == "auto" && std::getenv("SLURM_JOB_ID") && !flags.was_set("hostfile"));
    spec.launcher_args = split_words(flags.get_string("launcher-args"));
    if (flags.was_set("hostfile") && flags.was_set("np"))
      throw FlagError("--np: with --hostfile the hosts' slots are the processes; give one or the other");
    try {
      if (flags.was_set("hostfile"))
        all_hosts = read_hostfile(flags.get_string("hostfile"));
      else if (spec.slurm)
        all_hosts = slurm_hosts();
    } catch (const std::runtime_error& e) {
      throw FlagError(e.what());
    }
    spec.with_hosts = !all_hosts.empty();
    spec.np = static_cast<int>(flags.get_int("np"));
    if (min_hosts > 0 && !spec.with_hosts) throw FlagError("--min-hosts: needs --hostfile (or a Slurm allocation)");
    if (min_hosts > static_cast<int>(all_hosts.size()) && spec.with_hosts)
      throw FlagError("--min-hosts " + std::to_string(min_hosts) + ": the job has only " +
                      std::to_string(all_hosts.size()) + " hosts");
    if (max_restarts > 0 && flag_value(spec.program, "checkpoint-dir").empty())
      throw FlagError("--max-restarts: a restart resumes from the job's checkpoints; give it --checkpoint-dir");
  } catch (const FlagError& e) {
    std::fprintf(stderr, "launch: %s\n", e.what());
    return 2;
  }
  const std::string checkpoint_dir = flag_value(spec.program, "checkpoint-dir");
  const std::string log_dir = flag_value(spec.program, "log-dir");
  const std::string scratch =
      (std::filesystem::temp_directory_path() / ("ember-launch." + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(scratch);
  spec.hostfile = scratch + "/hostfile";
  forward_signals();

  std::vector<Host> in_use = all_hosts;
  int status = 0;
  for (int restarts = 0;; ++restarts) {
    // A restart resumes from the newest checkpoint, or starts again if the job failed before its first.
    const std::vector<std::string> program =
        restarts == 0 ? spec.program : with_resume(spec.program, has_checkpoint(checkpoint_dir));
    status = run(job_command(spec, in_use, program)).status;
    const char* final_reason = nullptr;
    if (status == 0) break;
    if (interrupted())
      final_reason = "stopped by a signal to the launcher";
    else if (status == 2)
      final_reason = "bad flags (exit status 2): a restart would fail the same way";
    else if (status == ember::train::kExitDataError)
      final_reason = "the dataset is missing or unreadable (exit status 66): a restart would fail the same way";
    else if (status == 130)
      final_reason = "interrupted (exit status 130)";
    else if (restarts >= max_restarts)
      final_reason = max_restarts == 0 ? "no restarts allowed (--max-restarts 0)" : "out of restarts";
    if (final_reason) {
      std::fprintf(stderr, "launch: the job ended with %s; not restarting: %s\n", describe(status).c_str(),
                   final_reason);
      std::filesystem::remove_all(scratch);
      return interrupted() ? 130 : status;
    }
    const double wait = std::min(60.0, backoff * static_cast<double>(1 << std::min(restarts, 10)));
    std::fprintf(stderr, "launch: the job failed (%s); restart %d of %d in %.1f s\n", describe(status).c_str(),
                 restarts + 1, max_restarts, wait);
    std::fflush(stderr);
    if (!sleep_unless_interrupted(wait)) {
      std::fprintf(stderr, "launch: stopped by a signal while waiting to restart\n");
      std::filesystem::remove_all(scratch);
      return 130;
    }
    std::vector<Host> dropped;
    if (min_hosts > 0) {
      std::vector<Host> answering;
      for (const Host& host : all_hosts) {
        const Outcome probe = run(probe_command(spec, host, scratch + "/probe"), probe_timeout, true);
        (probe.status == 0 ? answering : dropped).push_back(host);
      }
      if (static_cast<int>(answering.size()) < min_hosts) {
        std::fprintf(stderr, "launch: only %zu of %zu hosts answer (%s), fewer than --min-hosts %d; giving up\n",
                     answering.size(), all_hosts.size(), names(answering).c_str(), min_hosts);
        std::filesystem::remove_all(scratch);
        return status;
      }
      in_use = answering;
    }
    RestartRecord record;
    record.restart = restarts + 1;
    record.max_restarts = max_restarts;
    record.cause = describe(status);
    record.world_size = spec.with_hosts ? total_slots(in_use) : spec.np;
    record.hosts = spec.with_hosts ? names(in_use) : "this host";
    record.dropped = names(dropped);
    record.step = checkpoint_step(checkpoint_dir);
    record.time_text = now_text();
    std::fprintf(stderr, "launch: restart %d of %d at %s: %d process%s on %s%s, from %s\n", record.restart,
                 max_restarts, record.time_text.c_str(), record.world_size, record.world_size == 1 ? "" : "es",
                 record.hosts.c_str(), dropped.empty() ? "" : (" (" + names(dropped) + " left out: no answer)").c_str(),
                 has_checkpoint(checkpoint_dir) ? ("the checkpoint at step " + std::to_string(record.step)).c_str()
                                                : "the start (no checkpoint yet)");
    std::fflush(stderr);
    log_restart(log_dir, record);
  }
  std::filesystem::remove_all(scratch);
  return 0;
}
