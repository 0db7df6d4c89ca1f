#include "comm/host_backend.h"

#include <map>
#include <mutex>

namespace ember::comm {

namespace {

std::mutex registry_mutex;

// Function-local, so that a backend registering from its own static initialiser finds it made.
std::map<std::string, HostBackend>& registry() {
  static std::map<std::string, HostBackend> backends;
  return backends;
}

}  // namespace

void register_host_backend(const std::string& name, HostBackend backend) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry()[name] = std::move(backend);
}

const HostBackend* host_backend(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry().find(name);
  // std::map never moves its elements, and backends are only registered before main.
  return it == registry().end() ? nullptr : &it->second;
}

void abort_through_host_backends(const std::string& message, int status) {
  std::map<std::string, HostBackend> backends;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    backends = registry();
  }
  for (auto& [name, backend] : backends)
    if (backend.abort_job) backend.abort_job(message, status);
}

std::string backend_package(const std::string& name) { return "//comm/" + name; }

}  // namespace ember::comm
