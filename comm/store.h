// A key-value store every rank of a job reaches: where ranks meet without a launcher (rendezvous),
// and where backends exchange what they need before they can talk (a NCCL unique id, Gloo's
// addresses). The operations are PyTorch's c10d Store's, so its users find what they know:
// set/get (get waits for the key), add (an integer counter), compare_set, wait, check, erase.
// Values are bytes. Every waiting operation ends by its timeout with an ember::Error naming the
// keys it waited for; none waits forever.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::comm {

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // The key's value, once some rank has set it (waits up to timeout()).
  virtual std::vector<uint8_t> get(const std::string& key) = 0;
  // Adds `delta` to the key's integer (0 when unset) and returns the sum.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Sets `desired` when the key holds `expected` (or is unset and `expected` is empty); returns
  // the value after the call, which is `desired` exactly when it was set.
  virtual std::vector<uint8_t> compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                           const std::vector<uint8_t>& desired) = 0;
  // Waits until every key is set (up to `timeout`).
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  // Whether every key is set, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Removes the key; whether it was there.
  virtual bool erase(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  // Strings for the common case.
  void set(const std::string& key, const std::string& value) {
    set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::string get_string(const std::string& key) {
    std::vector<uint8_t> v = get(key);
    return std::string(v.begin(), v.end());
  }

 protected:
  std::chrono::milliseconds timeout_{std::chrono::minutes(5)};
};

}  // namespace ember::comm
