// Running the job's launcher (mpirun, srun) as a child: in its own process group, so a Ctrl-C at
// the terminal reaches tools/launch alone, which forwards it once (mpirun ends the job on it).
#pragma once

#include <string>
#include <vector>

namespace ember::launch {

// Exit status as a shell reports it: the code, or 128 + the signal that ended the process.
struct Outcome {
  int status = 0;
  bool timed_out = false;  // ended by run()'s time limit (then killed, status 137)
};

// Runs argv (PATH searched) to its end, or until `timeout_seconds` (<= 0: none) pass, then
// SIGKILLs its process group. `quiet` sends its output to /dev/null.
Outcome run(const std::vector<std::string>& argv, double timeout_seconds = 0, bool quiet = false);

// SIGINT and SIGTERM are forwarded to the running child and remembered: interrupted() is then
// true (the job was stopped by a person or a scheduler, not by a fault).
void forward_signals();
bool interrupted();
// Sleeps `seconds`, returning early (false) when interrupted.
bool sleep_unless_interrupted(double seconds);

// "exit status 1", "exit status 137 (signal 9: Killed)".
std::string describe(int status);

}  // namespace ember::launch
