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
  // 1/23, 1/21, ..., 1/3, each the double nearest (written with enough digits to round-trip).
  constexpr double kOddReciprocals[] = {
      0.043478260869565216, 0.047619047619047616, 0.05263157894736842, 0.058823529411764705, 0.06666666666666667,
      0.07692307692307693,  0.09090909090909091,  0.1111111111111111,  0.14285714285714285,  0.2,
      0.3333333333333333};
  double p = kOddReciprocals[0];
  for (int k = 1; k < 11; ++k) p = fma(p, z, kOddReciprocals[k]);
  const double two_s = 2.0 * s;  // exact
  const double log_m = fma(mul(two_s, z), p, two_s);
  // ln 2 split so that e * hi is exact for |e| < 2^11 (fdlibm's constants).
  constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
  const double de = static_cast<double>(e);
  return add(mul(de, kLn2Hi), add(mul(de, kLn2Lo), log_m));
}

// cos(2 pi u) for u in [0, 1): reduced exactly to an eighth of a turn around a quarter turn, where
// Taylor series of 10 terms are good to 2^-60. Coefficients are constants, not divisions: this runs
// once per normal number drawn.
EMBER_HOST_DEVICE inline double cos_two_pi(double u) {
  const double q = ::floor(add(u * 4.0, 0.5));  // the nearest quarter turn; u * 4 is exact
  const double r = u - q * 0.25;                // in [-1/8, 1/8]: exact, both are multiples of 2^-53
  const double x = mul(r, 6.283185307179586476925);
  const double z = mul(x, x);
  // With w = -z both series have positive coefficients: cos x = 1 + w (1/2! + w/4! + ... + w^9/20!),
  // sin x = x + x w (1/3! + w/5! + ... + w^8/19!). The coefficients are the doubles nearest 1/n!.
  constexpr double kEven[] = {4.110317623312165e-19, 1.5619206968586225e-16,
                              4.779477332387385e-14, 1.1470745597729725e-11,
                              2.08767569878681e-09,  2.755731922398589e-07,
                              2.48015873015873e-05,  0.001388888888888889,
                              0.041666666666666664,  0.5};  // 1/20!, 1/18!, ..., 1/2!
  constexpr double kOdd[] = {8.22063524662433e-18,   2.8114572543455206e-15, 7.647163731819816e-13,
                             1.6059043836821613e-10, 2.505210838544172e-08,  2.7557319223985893e-06,
                             0.0001984126984126984,  0.008333333333333333,   0.16666666666666666};  // 1/19!, ..., 1/3!
  double c = kEven[0];
  for (int k = 1; k < 10; ++k) c = fma(c, -z, kEven[k]);
  double s = kOdd[0];
  for (int k = 1; k < 9; ++k) s = fma(s, -z, kOdd[k]);
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
