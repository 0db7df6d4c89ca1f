#include "tools/launch/hosts.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace ember::launch {

std::vector<Host> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--hostfile: cannot read '" + path + "'");
  std::vector<Host> hosts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    Host host;
    if (!(words >> host.name)) continue;
    std::string option;
    while (words >> option) {
      const std::string where = "--hostfile " + path + ":" + std::to_string(number);
      if (option.rfind("slots=", 0) != 0)
        throw std::runtime_error(where + ": expected NAME [slots=N], got '" + option + "'");
      char* end = nullptr;
      const long slots = std::strtol(option.c_str() + 6, &end, 10);
      if (*end != '\0' || slots < 1)
        throw std::runtime_error(where + ": expected slots=N with N >= 1, got '" + option + "'");
      host.slots = static_cast<int>(slots);
    }
    hosts.push_back(host);
  }
  if (hosts.empty()) throw std::runtime_error("--hostfile: no host in '" + path + "'");
  return hosts;
}

void write_hostfile(const std::string& path, const std::vector<Host>& hosts) {
  std::ofstream out(path);
  for (const Host& h : hosts) out << h.name << " slots=" << h.slots << "\n";
  if (!out) throw std::runtime_error("launch: cannot write the hostfile '" + path + "'");
}

std::vector<Host> slurm_hosts() {
  const char* nodelist = std::getenv("SLURM_JOB_NODELIST");
  if (!nodelist)
    throw std::runtime_error("launch: under Slurm without SLURM_JOB_NODELIST (run it inside sbatch/salloc)");
  const char* per_node = std::getenv("SLURM_NTASKS_PER_NODE");
  const int slots = per_node ? std::max(1, std::atoi(per_node)) : 1;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(
      ::popen(("scontrol show hostnames '" + std::string(nodelist) + "'").c_str(), "r"), ::pclose);
  if (!pipe) throw std::runtime_error("launch: cannot run scontrol");
  std::vector<Host> hosts;
  char name[256];
  while (std::fscanf(pipe.get(), "%255s", name) == 1) hosts.push_back({name, slots});
  if (hosts.empty()) throw std::runtime_error("launch: scontrol named no host for '" + std::string(nodelist) + "'");
  return hosts;
}

int total_slots(const std::vector<Host>& hosts) {
  int total = 0;
  for (const Host& h : hosts) total += h.slots;
  return total;
}

std::string names(const std::vector<Host>& hosts) {
  std::string out;
  for (const Host& h : hosts) out += (out.empty() ? "" : ", ") + h.name;
  return out;
}

}  // namespace ember::launch
