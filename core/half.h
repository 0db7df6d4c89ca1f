// 16-bit floating types stored as raw bits; arithmetic happens in float.
// Conversions round to nearest even, like the hardware instructions (F16C, AVX512-BF16).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace ember {

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  EMBER_HOST_DEVICE BFloat16(float value) : bits(from_float(value)) {}  // NOLINT: implicit like a float type
  EMBER_HOST_DEVICE operator float() const { return bits_to_float(static_cast<uint32_t>(bits) << 16); }
  EMBER_HOST_DEVICE static uint16_t from_float(float value) {
    uint32_t word = float_to_bits(value);
    if ((word & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((word >> 16) | 0x40);  // quiet NaN
    uint32_t rounding = 0x7fffu + ((word >> 16) & 1u);
    return static_cast<uint16_t>((word + rounding) >> 16);
  }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  EMBER_HOST_DEVICE Half(float value) : bits(from_float(value)) {}  // NOLINT
  EMBER_HOST_DEVICE operator float() const { return to_float(bits); }

  EMBER_HOST_DEVICE static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    uint32_t word;
    if (exponent == 0x1f) {
      word = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
      word = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
      word = sign;
    } else {  // subnormal: renormalise
      int shift = 0;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ffu;
      word = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13);
    }
    return bits_to_float(word);
  }

  EMBER_HOST_DEVICE static uint16_t from_float(float value) {
    uint32_t word = float_to_bits(value);
    uint32_t sign = (word >> 16) & 0x8000u;
    uint32_t magnitude = word & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
    if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
    if (magnitude < 0x38800000u) {                                               // result is subnormal or zero
      if (magnitude < 0x33000000u) return static_cast<uint16_t>(sign);           // below half the smallest subnormal
      uint32_t exponent = magnitude >> 23;
      uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
      uint32_t shift = 126 - exponent;  // 14 + (113 - exponent) - 1
      uint32_t result = mantissa >> shift;
      uint32_t remainder = mantissa & ((1u << shift) - 1);
      uint32_t halfway = 1u << (shift - 1);
      if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
      return static_cast<uint16_t>(sign | result);
    }
    uint32_t rebased = magnitude - (112u << 23);
    uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rebased + rounding) >> 13));
  }
};

}  // namespace ember
