#include "comm/gloo/context.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <mutex>

#include "core/error.h"

namespace ember::comm::gloo_backend {

namespace {

// Gloo's store interface over a prefix of Ember's.
class PrefixedStore final : public ::gloo::rendezvous::Store {
 public:
  PrefixedStore(std::shared_ptr<comm::Store> store, std::string prefix)
      : store_(std::move(store)), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(prefix_ + key, std::vector<uint8_t>(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::vector<uint8_t> value = store_->get(prefix_ + key);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(prefixed(keys)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(prefixed(keys), timeout);
  }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const std::string& k : keys) out.push_back(prefix_ + k);
    return out;
  }
  std::shared_ptr<comm::Store> store_;
  std::string prefix_;
};

std::string host_name() {
  char name[256] = {};
  EMBER_CHECK(::gethostname(name, sizeof(name) - 1) == 0,
              "comm::init (gloo): gethostname failed; set EMBER_GLOO_HOST to this rank's address");
  return name;
}

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

std::shared_ptr<::gloo::transport::Device> shared_device(const std::string& master_host) {
  static std::mutex mutex;
  static std::shared_ptr<::gloo::transport::Device> device;
  std::lock_guard<std::mutex> lock(mutex);
  if (!device) {
    const auto attr = device_attributes(master_host);
    try {
      device = ::gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      EMBER_FAIL("comm::init (gloo): cannot listen on ",
                 attr.iface.empty() ? "address " + attr.hostname : "interface " + attr.iface, ": ", e.what(),
                 " (set EMBER_GLOO_HOST or EMBER_GLOO_IFACE to this rank's address or interface)");
    }
  }
  return device;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += p + "\n";
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1)
    out.push_back(text.substr(begin, end - begin));
  return out;
}

}  // namespace

::gloo::transport::tcp::attr device_attributes(const std::string& master_host) {
  ::gloo::transport::tcp::attr attr;
  const char* host = std::getenv("EMBER_GLOO_HOST");
  const char* iface = std::getenv("EMBER_GLOO_IFACE");
  if (host != nullptr && *host != '\0') {
    attr.hostname = host;
  } else if (iface != nullptr && *iface != '\0') {
    attr.iface = iface;
  } else if (is_loopback(master_host)) {
    attr.hostname = "127.0.0.1";
  } else {
    attr.hostname = host_name();
  }
  return attr;
}

Connected connect(const std::shared_ptr<Store>& store, const std::string& prefix, int rank, int size,
                  const std::string& master_host, std::chrono::milliseconds timeout) {
  Connected out;
  auto device = shared_device(master_host);
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
  context->setTimeout(timeout);
  Peers& peers = out.peers;
  peers.addresses.resize(size);
  peers.local_pids.assign(size, -1);
  try {
    if (store) {
      PrefixedStore gloo_store(store, prefix);
      context->connectFullMesh(gloo_store, device);
      // Each rank states its host and process, and how its connections name it (one line per
      // rank); peers read their own entry.
      const std::string host = host_name();
      std::vector<std::string> mine = {host, std::to_string(::getpid())};
      for (int r = 0; r < size; ++r) mine.push_back(r == rank ? "" : context->getPair(r)->address().str());
      store->set(prefix + "peers/" + std::to_string(rank), join(mine));
      for (int r = 0; r < size; ++r) {
        if (r == rank) continue;
        std::vector<std::string> theirs = split(store->get_string(prefix + "peers/" + std::to_string(r)));
        if (static_cast<int>(theirs.size()) != size + 2) continue;
        if (theirs[0] == host) peers.local_pids[r] = std::atol(theirs[1].c_str());
        peers.addresses[r] = theirs[2 + rank];
      }
    } else {
      EMBER_CHECK(size == 1, "comm::init (gloo): ", size, " ranks need a store to meet at");
      ::gloo::rendezvous::HashStore local;
      context->connectFullMesh(local, device);
    }
  } catch (const ::gloo::Exception& e) {
    EMBER_FAIL("comm::init (gloo): rank ", rank, " of ", size, " could not connect to its peers: ", e.what());
  }
  out.context = context;
  return out;
}

namespace {

// Whether process `pid` of this host has exited (a zombie has too).
bool process_gone(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');  // the state follows the command name, which may hold spaces
  return close == std::string::npos || line.compare(close + 1, 2, " Z") == 0;
}

}  // namespace

std::string what_broke(const std::string& message, const Peers& peers) {
  for (size_t r = 0; r < peers.addresses.size(); ++r)
    if (!peers.addresses[r].empty() && message.find(peers.addresses[r]) != std::string::npos)
      return "the connection to rank " + std::to_string(r) + " broke";
  std::vector<int> gone;
  for (size_t r = 0; r < peers.local_pids.size(); ++r)
    if (peers.local_pids[r] > 0 && process_gone(peers.local_pids[r])) gone.push_back(static_cast<int>(r));
  if (gone.empty()) return "";
  std::string names;
  for (size_t i = 0; i < gone.size(); ++i)
    names += (i == 0 ? "" : (i + 1 == gone.size() ? " and " : ", ")) + std::to_string(gone[i]);
  return gone.size() == 1 ? "rank " + names + " is gone (its process exited)"
                          : "ranks " + names + " are gone (their processes exited)";
}

}  // namespace ember::comm::gloo_backend
