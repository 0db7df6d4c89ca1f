// The seam between comm (which depends only on core) and a device backend that lives above the
// CUDA layer (comm/nccl): the backend registers a factory when linked, and init() and the mixed
// group call it to make a group for one device.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"

namespace ember::comm {

// Every member calls it with a buffer of the same size; afterwards all hold the group root's bytes
// (how a communicator's unique id reaches the ranks: an MPI broadcast, a file, a parent group).
using ShareFromRoot = std::function<void(std::vector<uint8_t>& bytes)>;

struct DeviceGroupSpec {
  int rank = 0, size = 1;
  Device device;
  std::string name;  // "WORLD", "group(0,2)"
  std::vector<int> world_ranks;
  ShareFromRoot share;
};

using DeviceGroupFactory = std::function<std::shared_ptr<ProcessGroup>(const DeviceGroupSpec&)>;

void register_device_backend(const std::string& name, DeviceGroupFactory factory);
// The factory linked under `name`, or an empty one.
DeviceGroupFactory device_backend(const std::string& name);

// Every member of `group` calls it; afterwards all hold `root`'s bytes (a broadcast of a uint8
// tensor on `device`, read back through a copy that orders after it).
void share_from(ProcessGroup& group, Device device, int root, std::vector<uint8_t>& bytes);
// share_from(group, device, 0, ...) as a ShareFromRoot.
ShareFromRoot share_through(std::shared_ptr<ProcessGroup> group, Device device);
// Shares through a file on a filesystem every rank sees: rank 0 writes it (atomically, by rename)
// and the others wait for it, up to EMBER_COLLECTIVE_TIMEOUT.
ShareFromRoot share_through_file(const std::string& path, int rank);

}  // namespace ember::comm
