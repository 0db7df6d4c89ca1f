// What a rank prints when the launcher stops it (SIGTERM: mpirun does that to every rank once one
// failed): the collectives each backend has in flight, so the survivors of a dead rank say what
// they were waiting for. Each backend publishes its own line; the handler prints them all.
#pragma once

#include <string>

namespace ember::comm {

enum class TerminateSource { Mpi = 0, Nccl = 1, Gloo = 2 };
constexpr int kTerminateSources = 3;

// Replaces `source`'s line (empty: nothing in flight). Not for signal handlers; any thread.
void publish_terminate_message(TerminateSource source, const std::string& text);
// Installs the SIGTERM handler once (later calls do nothing).
void install_terminate_handler();

}  // namespace ember::comm
