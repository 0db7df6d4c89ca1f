// Double-buffered lines per source: a writer fills the buffer not published, then publishes it,
// so the handler (async-signal-safe: atomics and write(2) only) never prints a half-written line.
#include "comm/terminate_message.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

namespace ember::comm {

namespace {

struct Line {
  char text[1024];
  std::atomic<int> length{0};
};

struct Slot {
  Line lines[2];
  std::atomic<int> published{0};
};

Slot slots[kTerminateSources];
std::mutex writers[kTerminateSources];  // two threads of one backend may publish at once

void on_terminate(int signal_number) {
  for (const Slot& slot : slots) {
    const Line& line = slot.lines[slot.published.load()];
    const int n = line.length.load();
    if (n > 0) {
      ssize_t ignored = ::write(2, line.text, static_cast<size_t>(n));
      (void)ignored;
    }
  }
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

}  // namespace

void publish_terminate_message(TerminateSource source, const std::string& text) {
  const int s = static_cast<int>(source);
  std::lock_guard<std::mutex> lock(writers[s]);
  Slot& slot = slots[s];
  Line& spare = slot.lines[1 - slot.published.load()];
  const size_t n = std::min(text.size(), sizeof(spare.text));
  spare.length.store(0);
  std::memcpy(spare.text, text.data(), n);
  spare.length.store(static_cast<int>(n));
  slot.published.store(&spare == &slot.lines[0] ? 0 : 1);
}

void install_terminate_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = &on_terminate;
    ::sigaction(SIGTERM, &action, nullptr);
  });
}

}  // namespace ember::comm
