#include "tools/launch/job.h"

#include <cstdlib>

namespace ember::launch {

std::string flag_value(const std::vector<std::string>& program, const std::string& name) {
  const std::string flag = "--" + name;
  std::string value;
  for (size_t i = 1; i < program.size(); ++i) {  // the last one wins, as in the train tool's parser
    if (program[i] == flag && i + 1 < program.size())
      value = program[++i];
    else if (program[i].rfind(flag + "=", 0) == 0)
      value = program[i].substr(flag.size() + 1);
  }
  return value;
}

std::vector<std::string> with_resume(const std::vector<std::string>& program, bool resume) {
  std::vector<std::string> out;
  for (size_t i = 0; i < program.size(); ++i) {
    if (i > 0 && program[i] == "--resume") {
      ++i;
      continue;
    }
    if (i > 0 && program[i].rfind("--resume=", 0) == 0) continue;
    out.push_back(program[i]);
  }
  if (resume) {
    out.push_back("--resume");
    out.push_back("latest");
  }
  return out;
}

std::vector<std::string> mpirun_defaults() {
  const std::pair<const char*, const char*> settings[] = {
      {"oob_tcp_keepalive_time", "10"}, {"oob_tcp_keepalive_intvl", "2"}, {"oob_tcp_keepalive_probes", "5"}};
  std::vector<std::string> out;
  for (const auto& [name, value] : settings) {
    if (std::getenv(("OMPI_MCA_" + std::string(name)).c_str())) continue;
    out.insert(out.end(), {"--mca", name, value});
  }
  return out;
}

std::vector<std::string> job_command(const JobSpec& spec, const std::vector<Host>& in_use,
                                     const std::vector<std::string>& program) {
  std::vector<std::string> cmd;
  const int np = spec.with_hosts ? total_slots(in_use) : spec.np;
  if (spec.slurm) {
    std::string nodelist;
    for (const Host& h : in_use) nodelist += (nodelist.empty() ? "" : ",") + h.name;
    cmd = {"srun", "--kill-on-bad-exit=1", "--ntasks=" + std::to_string(np)};
    if (spec.with_hosts) {
      cmd.push_back("--nodes=" + std::to_string(in_use.size()));
      cmd.push_back("--nodelist=" + nodelist);
    }
  } else {
    cmd = {"mpirun", "-np", std::to_string(np)};
    if (spec.with_hosts) {
      write_hostfile(spec.hostfile, in_use);
      cmd.insert(cmd.end(), {"--hostfile", spec.hostfile});
    }
    for (const std::string& a : mpirun_defaults()) cmd.push_back(a);
  }
  cmd.insert(cmd.end(), spec.launcher_args.begin(), spec.launcher_args.end());
  cmd.insert(cmd.end(), program.begin(), program.end());
  return cmd;
}

std::vector<std::string> probe_command(const JobSpec& spec, const Host& host, const std::string& probe_hostfile) {
  std::vector<std::string> cmd;
  if (spec.slurm) {
    cmd = {"srun", "--nodes=1", "--ntasks=1", "--nodelist=" + host.name};
  } else {
    write_hostfile(probe_hostfile, {Host{host.name, 1}});
    cmd = {"mpirun", "-np", "1", "--hostfile", probe_hostfile};
  }
  cmd.insert(cmd.end(), spec.launcher_args.begin(), spec.launcher_args.end());
  cmd.push_back("true");
  return cmd;
}

}  // namespace ember::launch
