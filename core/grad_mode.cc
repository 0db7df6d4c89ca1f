// The thread-local grad-mode flag.
#include "core/grad_mode.h"

namespace ember {

namespace {
thread_local bool grad_enabled = true;
}

bool GradMode::is_enabled() { return grad_enabled; }
void GradMode::set_enabled(bool enabled) { grad_enabled = enabled; }

}  // namespace ember
