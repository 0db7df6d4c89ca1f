// Double-precision log and cos(2 pi u) that give the same bits on the host and on a GPU, for the
// random fills (random_math.h): a seed must draw the same normal numbers on the CPU and on cuda:N.
// Each library's log and cos are accurate to an ulp or so, but not to the same ulp (a real H100
// drew float64 randn values that differed from the CPU's in the last bit), so these are built from
// operations IEEE 754 rounds exactly: +, *, /, sqrt and fma. nvcc would also fuse a * b + c into
// one fma where the host compiler may not, so products and sums go through mul/add, which neither
// side fuses. Accurate to about 2 ulp, which the fills need; not a general-purpose libm.
#pragma once

#include <cmath>

#include "core/host_device.h"

namespace ember::portable {

EMBER_HOST_DEVICE inline double mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  double p = a * b;
  // Opaque to the optimiser, so GCC (which contracts by default in C++ where FMA exists, as under
  // -march=native) cannot fuse the product into a following add.
  __asm__("" : "+x"(p));
  return p;
#endif
}

EMBER_HOST_DEVICE inline double add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

EMBER_HOST_DEVICE inline double div(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

// Correctly rounded on both sides (the instruction on a GPU; glibc's fma, in hardware or not).
EMBER_HOST_DEVICE inline double fma(double a, double b, double c) { return ::fma(a, b, c); }

// Natural log of a positive finite x.
EMBER_HOST_DEVICE inline double log(double x) {
  int e = 0;
  double m = ::frexp(x, &e);  // x = m 2^e, m in [1/2, 1): exact
  if (m < 0.70710678118654752440) {
    m = m * 2.0;  // exact
    e -= 1;
  }
  // m in [sqrt(1/2), sqrt(2)): log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.1716, and
  // atanh(s) / s = sum z^k / (2k + 1) over z = s^2 < 0.0295, whose 12th term is below 2^-60.
  const double f = m - 1.0;  // exact (Sterbenz)
  const double s = div(f, add(2.0, f));
  const double z = mul(s, s);
  double p = 1.0 / 23.0;
  for (int k = 10; k >= 1; --k) p = fma(p, z, 1.0 / (2 * k + 1));
  const double two_s = 2.0 * s;  // exact
  const double log_m = fma(mul(two_s, z), p, two_s);
  // ln 2 split so that e * hi is exact for |e| < 2^11 (fdlibm's constants).
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  const double de = static_cast<double>(e);
  return add(mul(de, kLn2Hi), add(mul(de, kLn2Lo), log_m));
}

// cos(2 pi u) for u in [0, 1): reduced exactly to an eighth of a turn around a quarter turn, where
// Taylor series of 10 terms are good to 2^-60.
EMBER_HOST_DEVICE inline double cos_two_pi(double u) {
  const double q = ::floor(add(u * 4.0, 0.5));  // the nearest quarter turn; u * 4 is exact
  const double r = u - q * 0.25;                // in [-1/8, 1/8]: exact, both are multiples of 2^-53
  const double x = mul(r, 6.283185307179586476925);
  const double z = mul(x, x);
  // With w = -z both series have positive coefficients: cos x = 1 + w (1/2! + w/4! + ... + w^9/20!),
  // sin x = x + x w (1/3! + w/5! + ... + w^8/19!). Factorials up to 20! are exact in double.
  double factorial = 2432902008176640000.0;  // 20!
  double c = 1.0 / factorial;
  for (int k = 9; k >= 1; --k) {
    factorial /= (2.0 * k + 2.0) * (2.0 * k + 1.0);  // (2k)!
    c = fma(c, -z, 1.0 / factorial);
  }
  factorial = 121645100408832000.0;  // 19!
  double s = 1.0 / factorial;
  for (int k = 8; k >= 1; --k) {
    factorial /= (2.0 * k + 3.0) * (2.0 * k + 2.0);  // (2k + 1)!
    s = fma(s, -z, 1.0 / factorial);
  }
  const double cos_x = fma(c, -z, 1.0);
  const double sin_x = fma(mul(x, z), -s, x);
  switch (static_cast<int>(q) & 3) {
    case 0:
      return cos_x;
    case 1:
      return -sin_x;
    case 2:
      return -cos_x;
    default:
      return sin_x;
  }
}

}  // namespace ember::portable
