// The hosts a job runs on: an Open MPI hostfile ("NAME slots=N", comments and blank lines
// allowed), or Slurm's allocation; which of them answer; and the hostfile of those in use.
#pragma once

#include <string>
#include <vector>

namespace ember::launch {

struct Host {
  std::string name;
  int slots = 1;
};

// Raises std::runtime_error naming the file and line of anything else.
std::vector<Host> read_hostfile(const std::string& path);
void write_hostfile(const std::string& path, const std::vector<Host>& hosts);
// Slurm's nodes (`scontrol show hostnames`), SLURM_NTASKS_PER_NODE (else 1) slots each.
std::vector<Host> slurm_hosts();
int total_slots(const std::vector<Host>& hosts);
std::string names(const std::vector<Host>& hosts);  // "h0, h1"

}  // namespace ember::launch
