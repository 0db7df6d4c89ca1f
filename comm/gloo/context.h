// A Gloo context (one group's connections) made through Ember's store: Gloo's rendezvous writes
// and reads each rank's addresses under a prefix of the store the ranks met at (comm/rendezvous.h),
// over one TCP device per process. The device listens on EMBER_GLOO_HOST when set, else on the
// interface EMBER_GLOO_IFACE names, else on 127.0.0.1 when the store's address is a loopback one
// (a job on one machine), else on the address this host's name resolves to (as PyTorch's Gloo
// does without GLOO_SOCKET_IFNAME).
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/store.h"

namespace ember::comm::gloo_backend {

struct Connected {
  std::shared_ptr<::gloo::Context> context;
  // Each peer's address as this rank's connection to it names it (gloo's failure messages do),
  // so a broken connection can be told by rank; this rank's own entry is empty.
  std::vector<std::string> peer_addresses;
};

// `store` may be null for a group of one. `master_host` is the store's address (it decides the
// device's address on first use).
Connected connect(const std::shared_ptr<Store>& store, const std::string& prefix, int rank, int size,
                  const std::string& master_host, std::chrono::milliseconds timeout);

// The rank whose address `message` names, or -1.
int peer_in(const std::string& message, const std::vector<std::string>& peer_addresses);

}  // namespace ember::comm::gloo_backend
