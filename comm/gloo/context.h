// A Gloo context (one group's connections) made through Ember's store: Gloo's rendezvous writes
// and reads each rank's addresses under a prefix of the store the ranks met at (comm/rendezvous.h),
// over one TCP device per process. The device listens on EMBER_GLOO_HOST when set, else on the
// interface EMBER_GLOO_IFACE names, else on 127.0.0.1 when the store's address is a loopback one
// (a job on one machine), else on the address this host's name resolves to (as PyTorch's Gloo
// does without GLOO_SOCKET_IFNAME).
#pragma once

#include <gloo/context.h>
#include <gloo/transport/tcp/attr.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/store.h"

namespace ember::comm::gloo_backend {

// Who the peers are, to name the one a transport error is about.
struct Peers {
  // Each peer's address as this rank's connection to it names it (Gloo's failure messages do, on
  // the side that connected); this rank's own entry is empty.
  std::vector<std::string> addresses;
  // The process id of each peer on this host (-1 elsewhere, and for this rank): one whose process is gone can be named
  // even when Gloo's message names an address the table does not hold.
  std::vector<long> local_pids;
};

struct Connected {
  std::shared_ptr<::gloo::Context> context;
  Peers peers;
};

// Where this process's Gloo device listens (the rule above), for a store at `master_host`; also
// what a raw Gloo context beside Ember's should use (tools/bench:allreduce's yardstick).
::gloo::transport::tcp::attr device_attributes(const std::string& master_host);

// `store` may be null for a group of one. `master_host` is the store's address (it decides the
// device's address on first use).
Connected connect(const std::shared_ptr<Store>& store, const std::string& prefix, int rank, int size,
                  const std::string& master_host, std::chrono::milliseconds timeout);

// What Gloo's failure `message` says about the peers, for an error: "the connection to rank 1
// broke" when it names a peer's address (it does on the side that connected), else "rank 1 is
// gone ..." / "ranks 0 and 1 are gone ..." for peers on this host whose processes exited; empty
// when neither tells.
std::string what_broke(const std::string& message, const Peers& peers);

}  // namespace ember::comm::gloo_backend
