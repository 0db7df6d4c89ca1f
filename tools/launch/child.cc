#include "tools/launch/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace ember::launch {

namespace {

std::atomic<pid_t> running{0};
std::atomic<bool> stop_requested{false};

void on_signal(int signal) {
  stop_requested = true;
  const pid_t child = running.load();
  if (child > 0) ::kill(-child, signal);
}

}  // namespace

void forward_signals() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

bool interrupted() { return stop_requested.load(); }

bool sleep_unless_interrupted(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (interrupted()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return !interrupted();
}

Outcome run(const std::vector<std::string>& argv, double timeout_seconds, bool quiet) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("launch: fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    if (quiet) {
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "launch: cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: a signal may come before the child has run
  running = pid;
  if (interrupted()) ::kill(-pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  Outcome outcome;
  int wstatus = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &wstatus, timeout_seconds > 0 ? WNOHANG : 0);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw std::runtime_error(std::string("launch: waitpid: ") + std::strerror(errno));
    if (timeout_seconds > 0 && std::chrono::steady_clock::now() > deadline && !outcome.timed_out) {
      outcome.timed_out = true;
      ::kill(-pid, SIGKILL);
    }
    if (timeout_seconds > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  running = 0;
  // What the job left in its group (an orted whose mpirun died) goes with it.
  ::kill(-pid, SIGKILL);
  outcome.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  return outcome;
}

std::string describe(int status) {
  // mpirun passes on a rank's death by signal S as 128 + S, as a shell does.
  if (status > 128 && status < 128 + 65) {
    const char* name = ::strsignal(status - 128);
    return "exit status " + std::to_string(status) + " (signal " + std::to_string(status - 128) +
           (name ? std::string(": ") + name : "") + ")";
  }
  return "exit status " + std::to_string(status);
}

}  // namespace ember::launch
