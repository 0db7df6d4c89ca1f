#include "comm/device_backend.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"

namespace ember::comm {

namespace {

std::mutex registry_mutex;

std::map<std::string, DeviceGroupFactory>& registry() {
  static std::map<std::string, DeviceGroupFactory> factories;
  return factories;
}

}  // namespace

void register_device_backend(const std::string& name, DeviceGroupFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry()[name] = std::move(factory);
}

DeviceGroupFactory device_backend(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry().find(name);
  return it == registry().end() ? DeviceGroupFactory() : it->second;
}

void share_from(ProcessGroup& group, Device device, int root, std::vector<uint8_t>& bytes) {
  NoGradGuard no_grad;
  std::vector<double> values(bytes.begin(), bytes.end());
  Tensor t = tensor(values, {static_cast<int64_t>(bytes.size())}).to(kUInt8).to(device);
  group.broadcast(t, root)->wait();
  // On a device, the copy below runs on the current stream, which wait() ordered after it.
  Tensor host = t.to(Device(kCPU)).contiguous();
  const uint8_t* data = static_cast<const uint8_t*>(host.data_ptr());
  bytes.assign(data, data + bytes.size());
}

ShareFromRoot share_through(std::shared_ptr<ProcessGroup> group, Device device) {
  return [group, device](std::vector<uint8_t>& bytes) { share_from(*group, device, 0, bytes); };
}

ShareFromRoot share_through_file(const std::string& path, int rank) {
  return [path, rank](std::vector<uint8_t>& bytes) {
    if (rank == 0) {
      const std::string temporary = path + ".tmp." + std::to_string(::getpid());
      {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        EMBER_CHECK(out.good(), "comm::init: cannot write EMBER_NCCL_ID_FILE's temporary file '", temporary, "'");
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        out.close();
        EMBER_CHECK(out.good(), "comm::init: writing '", temporary, "' failed (is the filesystem full?)");
      }
      // Readers see the whole id or nothing.
      EMBER_CHECK(std::rename(temporary.c_str(), path.c_str()) == 0, "comm::init: cannot rename '", temporary,
                  "' to EMBER_NCCL_ID_FILE='", path, "'");
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + collective_timeout();
    for (;;) {
      std::ifstream in(path, std::ios::binary);
      if (in.good()) {
        std::vector<uint8_t> read(bytes.size());
        in.read(reinterpret_cast<char*>(read.data()), static_cast<std::streamsize>(read.size()));
        EMBER_CHECK(in.gcount() == static_cast<std::streamsize>(read.size()), "comm::init: EMBER_NCCL_ID_FILE='", path,
                    "' holds ", in.gcount(), " bytes, expected ", read.size(), " (not written by rank 0?)");
        bytes = std::move(read);
        return;
      }
      EMBER_CHECK(std::chrono::steady_clock::now() < deadline, "comm::init: rank ", rank,
                  " waited EMBER_COLLECTIVE_TIMEOUT for rank 0 to write EMBER_NCCL_ID_FILE='", path,
                  "' (is rank 0 running, and is the path on a filesystem every rank sees?)");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
}

}  // namespace ember::comm
