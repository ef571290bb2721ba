// e**x and erf(x) in float64, and e**x in float32, by straight-line code that GCC vectorises
// (csrc/rnn_kernels.h, csrc/erf.cpp, csrc/nn_rows_backward.cpp). No include guard and no includes: it is included inside each
// instruction-set namespace of those files, after <cstdint> and <cstring>.

inline double bits_to_double(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof(d));
  return d;
}

inline uint64_t double_to_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof(u));
  return u;
}

// e**x in float64 for x in [-100, 100] (callers clamp): x = n ln2 + r (ln2 in two parts), e**r by its
// Taylor polynomial to degree 11 (|r| <= ln2 / 2: truncation error ~1e-15), times 2**n built from bits.
// Straight-line code that GCC vectorises.
inline double exp_clamped(double x) {
  const double shifter = 0x1.8p52;  // adding it rounds to an integer held in the low mantissa bits
  const double k = x * 0x1.71547652b82fep0 + shifter;
  const double n = k - shifter;
  const double r = (x - n * 0x1.62e42fee00000p-1) - n * 0x1.a39ef35793c76p-33;
  double p = 1.0 / 39916800;
  p = p * r + 1.0 / 3628800;
  p = p * r + 1.0 / 362880;
  p = p * r + 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  return p * bits_to_double((double_to_bits(k) - double_to_bits(shifter) + 1023) << 52);
}

// erf(x) in float64 to a relative error below 4e-13 (ample for float32 results; float64 results use the C
// library's erf). Below |x| = 0.5 erf's Taylor series x * 2/sqrt(pi) * sum (-x^2)^n / (n! (2n + 1)) to n = 9
// (truncation below 1e-11); above it 1 - exp(-x^2) * erfcx(x), where erfcx(x) = exp(x^2) erfc(x) is smooth
// and is approximated by a degree-12 polynomial in t = 1 / (1 + x/2), fitted (least squares on Chebyshev
// terms, against scipy.special.erfcx) on [0.5, 4.5]; |x| is clamped to 4.5, where 1 - erf(x) < 2e-10.
inline double erf_wide(double x) {
  const double a = x < 0 ? -x : x;
  const double z = x * x;
  double s = -1.0 / 6894720.0;  // n = 9: (-1)^n / (n! (2n + 1))
  s = s * z + 1.0 / 685440.0;
  s = s * z - 1.0 / 75600.0;
  s = s * z + 1.0 / 9360.0;
  s = s * z - 1.0 / 1320.0;
  s = s * z + 1.0 / 216.0;
  s = s * z - 1.0 / 42.0;
  s = s * z + 1.0 / 10.0;
  s = s * z - 1.0 / 3.0;
  s = s * z + 1.0;
  const double small = x * s * 1.1283791670955126;  // 2 / sqrt(pi)
  const double ac = a < 4.5 ? a : 4.5;
  const double t = 1.0 / (1.0 + 0.5 * ac);
  double p = -0.047030545301743547;
  p = p * t + 0.33576509019677747;
  p = p * t - 1.0431294197898529;
  p = p * t + 1.8031562507182306;
  p = p * t - 1.8379771370701188;
  p = p * t + 1.1349807070322833;
  p = p * t - 0.57148192628670702;
  p = p * t + 0.27970431948454083;
  p = p * t + 0.12726635357566246;
  p = p * t + 0.25551824663735018;
  p = p * t + 0.28106133953299922;
  p = p * t + 0.28216893869294229;
  p = p * t - 2.4235244222015062e-06;
  const double big = 1.0 - exp_clamped(-ac * ac) * p;
  return a < 0.5 ? small : (x < 0 ? -big : big);
}

// e**x in float32 arithmetic (softmax's shifted rows, erf's exp(-x^2)): x = n ln2 + r (ln2 in two parts,
// |r| <= ln2/2) and e**r by its Taylor polynomial to degree 7 (truncation ~5e-9, under float32's rounding);
// results below 2**-126 (x < -87.3) are flushed to 0, -inf gives 0, above 88 clamped, NaN passes through.
inline float exp_float(float x) {
  const float xc = x < -87.3f ? -87.3f : (x > 88.0f ? 88.0f : x);
  const float shifter = 0x1.8p23f;
  const float k = xc * 0x1.715476p0f + shifter;
  const float n = k - shifter;
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float q = 1.0f / 5040;
  q = q * r + 1.0f / 720;
  q = q * r + 1.0f / 120;
  q = q * r + 1.0f / 24;
  q = q * r + 1.0f / 6;
  q = q * r + 0.5f;
  const float p = (q * r * r + r) + 1.0f;
  uint32_t kb;
  std::memcpy(&kb, &k, sizeof(kb));
  const uint32_t bits = (kb - 0x4b400000u + 127u) << 23;  // 2**n: k's low mantissa bits hold n
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const float result = x < -87.3f ? 0.0f : p * scale;
  return x != x ? x : result;
}
