// Test values for NCCL collectives: element bytes per ncclDataType_t from doubles and back, the
// host reference of each reduction (in double, from the same values), and the tolerance per type.
// Values are small integers (or eighths for floating types), so sums are exact in every type and
// only products, averages and 16-bit rounding differ from the reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "cuda/nccl.h"

namespace ember::testing {

inline bool slow_mode() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#else
  const char* delay = std::getenv("EMBER_EMU_DELAY");
  return delay != nullptr && *delay != '\0' && std::string(delay) != "0";
#endif
}

inline const std::vector<ncclDataType_t>& all_types() {
  static const std::vector<ncclDataType_t> types = {ncclInt8,   ncclUint8,   ncclInt32,   ncclUint32,  ncclInt64,
                                                    ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
  return types;
}

inline bool is_float_type(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16;
}
inline bool is_unsigned_type(ncclDataType_t t) { return t == ncclUint8 || t == ncclUint32 || t == ncclUint64; }

inline size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

// Relative tolerance against the double reference: 16-bit types round after every step.
inline double tolerance(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16:
      return 4e-3;
    case ncclBfloat16:
      return 3e-2;
    case ncclFloat32:
      return 1e-6;
    case ncclFloat64:
      return 1e-14;
    default:
      return 0;
  }
}

template <class T>
void store_as(char* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}
template <class T>
T load_as(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

inline std::vector<char> encode(ncclDataType_t t, const std::vector<double>& values) {
  const size_t size = type_size(t);
  std::vector<char> bytes(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) {
    char* p = bytes.data() + i * size;
    const double v = values[i];
    switch (t) {
      case ncclInt8:
        store_as(p, static_cast<int8_t>(v));
        break;
      case ncclUint8:
        store_as(p, static_cast<uint8_t>(v));
        break;
      case ncclInt32:
        store_as(p, static_cast<int32_t>(v));
        break;
      case ncclUint32:
        store_as(p, static_cast<uint32_t>(v));
        break;
      case ncclInt64:
        store_as(p, static_cast<int64_t>(v));
        break;
      case ncclUint64:
        store_as(p, static_cast<uint64_t>(v));
        break;
      case ncclFloat16:
        store_as(p, Half(static_cast<float>(v)));
        break;
      case ncclBfloat16:
        store_as(p, BFloat16(static_cast<float>(v)));
        break;
      case ncclFloat32:
        store_as(p, static_cast<float>(v));
        break;
      default:
        store_as(p, v);
        break;
    }
  }
  return bytes;
}

inline std::vector<double> decode(ncclDataType_t t, const std::vector<char>& bytes) {
  const size_t size = type_size(t);
  std::vector<double> values(bytes.size() / size);
  for (size_t i = 0; i < values.size(); ++i) {
    const char* p = bytes.data() + i * size;
    switch (t) {
      case ncclInt8:
        values[i] = load_as<int8_t>(p);
        break;
      case ncclUint8:
        values[i] = load_as<uint8_t>(p);
        break;
      case ncclInt32:
        values[i] = load_as<int32_t>(p);
        break;
      case ncclUint32:
        values[i] = load_as<uint32_t>(p);
        break;
      case ncclInt64:
        values[i] = static_cast<double>(load_as<int64_t>(p));
        break;
      case ncclUint64:
        values[i] = static_cast<double>(load_as<uint64_t>(p));
        break;
      case ncclFloat16:
        values[i] = static_cast<float>(load_as<Half>(p));
        break;
      case ncclBfloat16:
        values[i] = static_cast<float>(load_as<BFloat16>(p));
        break;
      case ncclFloat32:
        values[i] = load_as<float>(p);
        break;
      default:
        values[i] = load_as<double>(p);
        break;
    }
  }
  return values;
}

// Small values whose products of three ranks still fit int8.
inline std::vector<double> random_values(ncclDataType_t t, size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(is_unsigned_type(t) ? 0 : -5, 5);
  std::vector<double> v(n);
  for (double& x : v) x = is_float_type(t) ? pick(rng) / 8.0 * 3 : pick(rng);
  return v;
}

// inputs[r][i] reduced over r, as NCCL defines each op (an integer average truncates).
inline std::vector<double> reference_reduce(ncclDataType_t t, ncclRedOp_t op,
                                            const std::vector<std::vector<double>>& inputs) {
  std::vector<double> out = inputs[0];
  for (size_t r = 1; r < inputs.size(); ++r)
    for (size_t i = 0; i < out.size(); ++i) {
      const double x = inputs[r][i];
      out[i] = op == ncclProd  ? out[i] * x
               : op == ncclMax ? std::max(out[i], x)
               : op == ncclMin ? std::min(out[i], x)
                               : out[i] + x;
    }
  if (op == ncclAvg)
    for (double& x : out)
      x = is_float_type(t) ? x / static_cast<double>(inputs.size())
                           : std::trunc(x / static_cast<double>(inputs.size()));
  return out;
}

// The first index where got and expected differ beyond the type's tolerance, or -1.
inline long first_mismatch(ncclDataType_t t, const std::vector<double>& got, const std::vector<double>& expected) {
  if (got.size() != expected.size()) return 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - expected[i]) > tolerance(t) * std::max(1.0, std::fabs(expected[i])))
      return static_cast<long>(i);
  return -1;
}

}  // namespace ember::testing
