// The command lines tools/launch runs: the job (mpirun over a hostfile or this host, or srun under
// Slurm), resumed from its newest checkpoint on a restart, and the probe that asks one host whether
// it can start a process.
#pragma once

#include <string>
#include <vector>

#include "tools/launch/hosts.h"

namespace ember::launch {

struct JobSpec {
  bool slurm = false;                      // srun instead of mpirun
  std::vector<std::string> launcher_args;  // --launcher-args, split on spaces
  bool with_hosts = false;                 // a hostfile or Slurm's nodes (else -np on this host)
  int np = 1;                              // without hosts
  std::string hostfile;                    // where the hosts in use are written for mpirun
  std::vector<std::string> program;        // TRAIN FLAGS...
};

// The value of `--name V` or `--name=V` in the program's flags, or "".
std::string flag_value(const std::vector<std::string>& program, const std::string& name);
// The program's flags without any --resume, with `--resume latest` when `resume`.
std::vector<std::string> with_resume(const std::vector<std::string>& program, bool resume);

// mpirun's settings for jobs across hosts unless the environment sets them (OMPI_MCA_*): TCP
// keepalives on the daemons' idle connections, so a host cut off is noticed in about 20 s
// (Open MPI's default: 300 s + 9 x 20 s, during which mpirun waits for that host).
std::vector<std::string> mpirun_defaults();

// `program`: spec.program as given (the first run) or with_resume()'s (a restart).
std::vector<std::string> job_command(const JobSpec& spec, const std::vector<Host>& in_use,
                                     const std::vector<std::string>& program);
std::vector<std::string> probe_command(const JobSpec& spec, const Host& host, const std::string& probe_hostfile);

}  // namespace ember::launch
