// The SIGINT watcher: sigwait on a thread of its own, so what a Ctrl-C does runs as ordinary code
// on that thread, never inside a signal handler. It touches only atomics and write/_exit, so it is
// safe while main returns and static destructors run.
#include "tools/train/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace ember::train {

namespace {

std::atomic<bool> checkpointing{false};
std::atomic<bool> requested{false};

[[noreturn]] void take_interrupts(sigset_t interrupt) {
  for (;;) {
    int signal_number = 0;
    if (sigwait(&interrupt, &signal_number) != 0) continue;
    if (!checkpointing.load()) {
      // Set-up has nothing to save: SIGINT's default action, as a parent shell expects of Ctrl-C.
      ::signal(SIGINT, SIG_DFL);
      pthread_sigmask(SIG_UNBLOCK, &interrupt, nullptr);
      ::raise(SIGINT);
      ::_exit(130);
    }
    // The first Ctrl-C asks for a checkpoint at the end of the current step; a second one, for a
    // user who will not wait for that step (or whose step hangs), exits at once without one.
    if (requested.exchange(true)) {
      static const char message[] = "\ntrain: second interrupt: exiting now, without a checkpoint\n";
      [[maybe_unused]] ssize_t written = ::write(STDERR_FILENO, message, sizeof(message) - 1);
      ::_exit(130);
    }
  }
}

}  // namespace

void start_interrupt_watcher() {
  sigset_t interrupt;
  sigemptyset(&interrupt);
  sigaddset(&interrupt, SIGINT);
  const int error = pthread_sigmask(SIG_BLOCK, &interrupt, nullptr);
  EMBER_CHECK(error == 0, "train: cannot block SIGINT: ", std::strerror(error));
  // Never joined: it waits in sigwait until the process ends.
  std::thread([interrupt] { take_interrupts(interrupt); }).detach();
}

void checkpoint_on_interrupt() { checkpointing.store(true); }

bool interrupt_requested() { return requested.load(); }

}  // namespace ember::train
