// Rendezvous without a launcher: the ranks meet at a TcpStore that rank 0 serves at
// EMBER_MASTER_ADDR:EMBER_MASTER_PORT (or PyTorch's MASTER_ADDR:MASTER_PORT), each started with
// RANK / WORLD_SIZE (/ LOCAL_RANK) by whatever starts processes: a shell loop, a container
// orchestrator, torchrun-like tools.
//
// Rank 0 serves the store on the address it is given (127.0.0.1 keeps it on the loopback
// interface; EMBER_STORE_BIND=0.0.0.0 serves every interface while the others connect to
// EMBER_MASTER_ADDR). EMBER_JOB_ID names the job (default "ember"): a store of another job on
// the port is refused by name. Each rank claims its number (two processes with one RANK is an
// error naming both), states the world size (a different WORLD_SIZE is an error naming the rank
// that said otherwise), then waits for every rank, up to EMBER_COLLECTIVE_TIMEOUT, naming the
// ranks that never came.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "comm/device_backend.h"
#include "comm/store.h"

namespace ember::comm {

struct MasterAddress {
  std::string host;
  int port = 0;
  std::string source;  // "EMBER_MASTER_ADDR/EMBER_MASTER_PORT" or "MASTER_ADDR/MASTER_PORT"
};

// The store's address from the environment; nothing when neither pair is set. A port that is not
// a port, or an address without its port, raises.
std::optional<MasterAddress> master_address();

struct RendezvousOptions {
  MasterAddress master;
  int rank = 0;
  int world_size = 1;
  std::string job = "ember";
  std::string bind;  // rank 0's listening address; empty: the master's own
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

// Meets every rank at the store (rank 0 serves it) and returns this rank's client.
std::shared_ptr<Store> rendezvous(const RendezvousOptions& options);
// The options from the environment (EMBER_JOB_ID, EMBER_STORE_BIND, EMBER_COLLECTIVE_TIMEOUT).
RendezvousOptions rendezvous_options(const MasterAddress& master, int rank, int world_size);

// Rank 0's bytes to every rank through the store, under `key` (a communicator's unique id).
ShareFromRoot share_through_store(std::shared_ptr<Store> store, const std::string& key, int rank);

}  // namespace ember::comm
