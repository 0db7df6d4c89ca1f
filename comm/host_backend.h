// The seam between comm (backend-neutral) and the backends that carry host tensors and make the
// world group (comm/mpi, comm/gloo): linking the backend's package registers it at static init, and
// init() and abort_job() find it here by name. A program that did not link it gets an error naming
// the Bazel dep to add.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/init.h"
#include "comm/process_group.h"

namespace ember::comm {

struct HostBackend {
  // The world group: the backend's own rendezvous (MPI_Init), or the store the ranks met at
  // (Gloo; null for a world of one without a store), which init() then checks against what the
  // launcher's environment said.
  std::function<std::shared_ptr<ProcessGroup>(const LaunchEnvironment&, const std::shared_ptr<Store>&)> world;
  // Ends every rank of the job with `message` when the backend's runtime is up (does not return
  // then); returns when it is not, and abort_job() exits this process alone.
  std::function<void(const std::string& message, int status)> abort_job;
};

void register_host_backend(const std::string& name, HostBackend backend);
// The backend linked under `name`, or nullptr.
const HostBackend* host_backend(const std::string& name);
// Calls every linked backend's abort_job (abort_job() does, before it exits this process alone).
void abort_through_host_backends(const std::string& message, int status);
// The Bazel package that provides backend `name` ("mpi" -> "//comm/mpi"), for error messages.
std::string backend_package(const std::string& name);

}  // namespace ember::comm
