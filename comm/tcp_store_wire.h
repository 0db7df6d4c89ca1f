// TcpStore's wire format, shared by its client (tcp_store.cc) and server (tcp_store_server.cc).
// A frame is a u32 body length then the body; integers are little-endian, strings a u32 length
// then the bytes. A request's body is a command byte and its fields; a reply's, a status byte and
// its payload.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "comm/tcp_store.h"

namespace ember::comm::wire {

enum class Command : uint8_t {
  Hello = 1,       // job
  Set = 2,         // key, value
  Get = 3,         // key, timeout ms (u64): waits for the key
  Add = 4,         // key, delta (i64)
  CompareSet = 5,  // key, expected, desired
  Wait = 6,        // count (u32), keys, timeout ms (u64)
  Check = 7,       // count, keys
  Erase = 8,       // key
  NumKeys = 9,
};

enum class Status : uint8_t {
  Ok = 0,
  Timeout = 1,
  Refused = 2,  // Hello from another job: the payload is the store's job
  Failed = 3,   // the payload says why (add to a value that is not an integer)
};

// The largest body a frame may announce: a compare_set's two largest values and a key.
constexpr size_t kMaxBody = 1 + 3 * 4 + kStoreMaxKeyBytes + 2 * kStoreMaxValueBytes + 16;
constexpr size_t kMaxKeys = 4096;  // keys in one wait or check

class Writer {
 public:
  Writer() : bytes_(4, 0) {}  // room for the length
  Writer& u8(uint8_t v) {
    bytes_.push_back(v);
    return *this;
  }
  Writer& u32(uint32_t v) { return raw(&v, 4); }
  Writer& u64(uint64_t v) { return raw(&v, 8); }
  Writer& i64(int64_t v) { return raw(&v, 8); }
  Writer& bytes(const void* p, size_t n) {
    u32(static_cast<uint32_t>(n));
    return raw(p, n);
  }
  Writer& str(const std::string& s) { return bytes(s.data(), s.size()); }
  Writer& blob(const std::vector<uint8_t>& v) { return bytes(v.data(), v.size()); }
  // The frame, its length filled in.
  std::vector<uint8_t> frame() {
    const uint32_t n = static_cast<uint32_t>(bytes_.size() - 4);
    std::memcpy(bytes_.data(), &n, 4);
    return std::move(bytes_);
  }

 private:
  Writer& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

// Reads fields from a body; any read past its end, or a string over `max`, fails (nullopt) and
// every later read fails too, so a malformed body is refused whole.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  std::optional<uint8_t> u8() { return scalar<uint8_t>(); }
  std::optional<uint32_t> u32() { return scalar<uint32_t>(); }
  std::optional<uint64_t> u64() { return scalar<uint64_t>(); }
  std::optional<int64_t> i64() { return scalar<int64_t>(); }
  std::optional<std::string> str(size_t max) {
    auto n = u32();
    if (!n || *n > max || static_cast<size_t>(end_ - p_) < *n) return fail<std::string>();
    std::string s(reinterpret_cast<const char*>(p_), *n);
    p_ += *n;
    return s;
  }
  std::optional<std::vector<uint8_t>> blob(size_t max) {
    auto n = u32();
    if (!n || *n > max || static_cast<size_t>(end_ - p_) < *n) return fail<std::vector<uint8_t>>();
    std::vector<uint8_t> v(p_, p_ + *n);
    p_ += *n;
    return v;
  }
  bool at_end() const { return ok_ && p_ == end_; }
  bool ok() const { return ok_; }

 private:
  template <typename T>
  std::optional<T> scalar() {
    T v;
    return raw(&v, sizeof(T)) ? std::optional<T>(v) : std::nullopt;
  }
  template <typename T>
  std::optional<T> fail() {
    ok_ = false;
    p_ = end_;
    return std::nullopt;
  }
  bool raw(void* out, size_t n) {
    if (!ok_ || static_cast<size_t>(end_ - p_) < n) {
      fail<int>();
      return false;
    }
    std::memcpy(out, p_, n);
    p_ += n;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

}  // namespace ember::comm::wire
