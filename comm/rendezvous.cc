#include "comm/rendezvous.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <sstream>

#include "comm/process_group.h"
#include "comm/tcp_store.h"
#include "core/error.h"

namespace ember::comm {

namespace {

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::string text_of(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// "host pid N": who claimed a rank, for the message when two did (numbered, so two claims from
// one process differ too).
std::string this_process() {
  static std::atomic<int> claims{0};
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + " pid " + std::to_string(::getpid()) + " (#" + std::to_string(++claims) + ")";
}

std::string rank_key(int r) { return "rank/" + std::to_string(r); }

}  // namespace

std::optional<MasterAddress> master_address() {
  for (const auto& [addr_name, port_name] :
       {std::pair{"EMBER_MASTER_ADDR", "EMBER_MASTER_PORT"}, std::pair{"MASTER_ADDR", "MASTER_PORT"}}) {
    const char* addr = env_or_null(addr_name);
    const char* port = env_or_null(port_name);
    if (addr == nullptr && port == nullptr) continue;
    EMBER_CHECK(addr != nullptr && port != nullptr, "comm::init: ", addr ? addr_name : port_name, " is set but ",
                addr ? port_name : addr_name, " is not; the ranks meet at the store at ", addr_name, ":", port_name);
    char* end = nullptr;
    const long p = std::strtol(port, &end, 10);
    EMBER_CHECK(end != port && *end == '\0' && p > 0 && p < 65536, "comm::init: ", port_name,
                " must be a TCP port (1-65535), got '", port, "'");
    return MasterAddress{addr, static_cast<int>(p), std::string(addr_name) + "/" + port_name};
  }
  return std::nullopt;
}

RendezvousOptions rendezvous_options(const MasterAddress& master, int rank, int world_size) {
  RendezvousOptions o;
  o.master = master;
  o.rank = rank;
  o.world_size = world_size;
  if (const char* job = env_or_null("EMBER_JOB_ID")) o.job = job;
  if (const char* bind = env_or_null("EMBER_STORE_BIND")) o.bind = bind;
  o.timeout = collective_timeout();
  return o;
}

std::shared_ptr<Store> rendezvous(const RendezvousOptions& options) {
  const int rank = options.rank, size = options.world_size;
  const std::string where = options.master.host + ":" + std::to_string(options.master.port);
  TcpStoreOptions o;
  o.host = options.master.host;
  o.port = options.master.port;
  o.job = options.job;
  o.timeout = options.timeout;
  o.who = "rank " + std::to_string(rank);
  std::shared_ptr<TcpStore> store;
  if (rank == 0) {
    if (!options.bind.empty()) o.host = options.bind;
    store = TcpStore::serve(o);
  } else {
    store = TcpStore::connect(o);
  }
  // The world's size, as the first rank to arrive said it; checked before the rank is claimed, so
  // a rank that disagrees never counts as joined.
  const std::string said = std::to_string(size) + " (rank " + std::to_string(rank) + ")";
  const std::string first = text_of(store->compare_set("world_size", {}, bytes_of(said)));
  EMBER_CHECK(first.substr(0, first.find(' ')) == std::to_string(size), "comm::init: rank ", rank,
              " has WORLD_SIZE=", size, " but the job's store at ", where, " has WORLD_SIZE=", first,
              ": every rank must be started with the same WORLD_SIZE");
  // The rank's number, claimed once.
  const std::string me = this_process();
  const std::string owner = text_of(store->compare_set(rank_key(rank), {}, bytes_of(me)));
  EMBER_CHECK(owner == me, "comm::init: rank ", rank, " of job '", options.job, "' was claimed twice, by ", owner,
              " and by ", me, " (two processes started with RANK=", rank, ")");
  // Everyone.
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(rank_key(r));
  try {
    store->wait(keys, options.timeout);
  } catch (const ember::Error&) {
    std::ostringstream waited;
    waited << "comm::init: rank " << rank << " waited " << options.timeout.count() / 1000.0 << " s at the store at "
           << where << " (" << options.master.source << ") for every rank of " << size << "; ";
    std::string missing;
    int count = 0;
    try {
      for (int r = 0; r < size; ++r) {
        if (store->check({rank_key(r)})) continue;
        if (count++ < 16) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    } catch (const ember::Error&) {
      EMBER_FAIL(waited.str(), "and then the store went away (rank 0, which serves it, ended: see its message)");
    }
    EMBER_FAIL(waited.str(), count, count == 1 ? " never joined: rank " : " never joined: ranks ", missing,
               count > 16 ? ", ..." : "", " (EMBER_COLLECTIVE_TIMEOUT sets how long to wait)");
  }
  return store;
}

ShareFromRoot share_through_store(std::shared_ptr<Store> store, const std::string& key, int rank) {
  return [store = std::move(store), key, rank](std::vector<uint8_t>& bytes) {
    if (rank == 0) {
      store->set(key, bytes);
      return;
    }
    std::vector<uint8_t> got = store->get(key);
    EMBER_CHECK(got.size() == bytes.size(), "comm::init: the store's '", key, "' holds ", got.size(),
                " bytes, expected ", bytes.size(), " (set by another program?)");
    bytes = std::move(got);
  };
}

}  // namespace ember::comm
