"""C++17/OpenMP code for scheduled kernels.

Each :class:`~ember._inductor.scheduler.FusedKernel` becomes one ``static void`` function taking the
table of buffer pointers (``void** bufs``, one slot per buffer in memory), the thread count and the
calling segment's error flag (``int* ember_err``, set by an integer division by zero). A run of
kernels between two extern calls is one ``extern "C"`` entry ``int segment<k>(bufs, nthreads)``
that calls them in order and returns the flag, so the wrapper makes one native call per segment.

Loops: a pointwise kernel is ``#pragma omp parallel for`` over its outer dims (when the work exceeds
:data:`PARALLEL_THRESHOLD` elements) with a contiguous ``#pragma omp simd`` inner loop; a kernel
with reductions runs its outer dims in parallel and each reduction as an inner loop
(``omp simd reduction`` for sums and products), combining per-iteration accumulators, so results
do not depend on the thread count. A full reduction (no outer dims) splits its outermost reduced
dim into a fixed number of chunks (:data:`REDUCTION_SPLIT`, independent of the thread count) whose
partial results are combined in order: deterministic. A segment whose kernels visit fewer than
:data:`SEGMENT_PARALLEL_WORK` elements together sets its thread count to one: its first parallel region
would wait for the sleeping OpenMP worker longer than the second core saves.

Values: float32/float64/integer types map to C types; float16/bfloat16 are stored as ``uint16_t``
and computed as ``float`` (helpers convert with round-to-nearest-even).
"""

from __future__ import annotations

import math

import sympy

import ember

from .. import ir
from ..scheduler import StructuralKeys

__all__ = ["generate", "ctype", "kernel_work", "segment_work", "PARALLEL_THRESHOLD", "SEGMENT_PARALLEL_WORK",
           "REDUCTION_SPLIT", "COLUMN_BLOCK"]

#: Fewer elements than this run on one thread (the OpenMP fork costs a few microseconds).
PARALLEL_THRESHOLD = 32768
#: A segment (the kernels between two extern calls) visiting fewer elements than this, summed over its
#: kernels, runs all of them on one thread. Its first parallel region would wait for the OpenMP worker to
#: wake: the worker sleeps after a short spin (``ember._openmp``) and the extern call before the segment
#: (a matrix product on one BLAS thread) outlasts it. On the shared 2-core machine a wake-up costs
#: about 0.1 ms, more than the second core saves on a few hundred thousand elements (a transformer
#: layer's segments at the model suite's sizes).
SEGMENT_PARALLEL_WORK = 1 << 19
#: Chunks of a full reduction (fixed, so the sum's rounding is the same on any thread count).
REDUCTION_SPLIT = 16
#: Outputs per block of a reduction over leading dims (one accumulator each, kept in registers/L1).
COLUMN_BLOCK = 256

_CTYPES = {
    ember.float32: "float", ember.float64: "double", ember.int64: "int64_t", ember.int32: "int32_t",
    ember.int16: "int16_t", ember.int8: "int8_t", ember.uint8: "uint8_t", ember.bool: "bool",
    ember.float16: "uint16_t", ember.bfloat16: "uint16_t",
}
_HALF = (ember.float16, ember.bfloat16)


def ctype(dtype):
    """The C type a buffer of ``dtype`` is stored as."""
    return _CTYPES[dtype]


def value_ctype(dtype):
    """The C type a value of ``dtype`` is computed in (half types compute as float)."""
    return "float" if dtype in _HALF else _CTYPES[dtype]


PRELUDE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <algorithm>
#include <omp.h>
#include <type_traits>

static inline float ember_h2f(uint16_t h) { _Float16 v; std::memcpy(&v, &h, 2); return (float)v; }
static inline uint16_t ember_f2h(float f) {
    _Float16 v = (_Float16)f; uint16_t h; std::memcpy(&h, &v, 2); return h;
}
static inline float ember_b2f(uint16_t b) {
    uint32_t u = (uint32_t)b << 16; float f; std::memcpy(&f, &u, 4); return f;
}
static inline uint16_t ember_f2b(float f) {
    uint32_t u; std::memcpy(&u, &f, 4);
    if (f != f) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
// float exp and erf as straight-line arithmetic with explicit fused multiply-adds (the build
// turns contraction off so ordinary arithmetic rounds like the eager kernels), so `omp simd`
// loops vectorise them (libm's
// expf/erff are calls the compiler cannot vectorise without -ffast-math). exp: Cody-Waite range
// reduction x = k*ln2 + r, a degree-7 Taylor polynomial on |r| <= ln2/2, then 2^k applied in two
// halves so results near overflow/underflow stay right (max error ~1 ulp). erf: x*P(x^2) for
// |x| < 0.9 (P a degree-5 least-squares fit of erf(x)/x, relative error 4e-8 in double); above,
// 1 - exp(-x^2)*Q(1/(1+x/2)) with Q a degree-5 fit of erfc(x)*exp(x^2) on [0.9, 4.2] (absolute
// error 7e-8 in double); |x| >= 4.2 gives +-1. Measured: at most 2.4 ulp from the exact value.
static inline float ember_pow2i(int32_t k) {
    int32_t bits = (k + 127) << 23; float f; std::memcpy(&f, &bits, 4); return f;
}
static inline float ember_expf(float x) {
    float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
    float k = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = __builtin_fmaf(-k, 0.693145751953125f, xc);
    r = __builtin_fmaf(-k, 1.428606765330187e-06f, r);
    float p = 1.0f / 5040.0f;
    p = __builtin_fmaf(p, r, 1.0f / 720.0f);
    p = __builtin_fmaf(p, r, 1.0f / 120.0f);
    p = __builtin_fmaf(p, r, 1.0f / 24.0f);
    p = __builtin_fmaf(p, r, 1.0f / 6.0f);
    p = __builtin_fmaf(p, r, 0.5f);
    p = __builtin_fmaf(p, r, 1.0f);
    p = __builtin_fmaf(p, r, 1.0f);
    int32_t ki = (int32_t)k;
    int32_t k1 = ki / 2;
    // a NaN x makes r, p and so the result NaN without a test
    return p * ember_pow2i(k1) * ember_pow2i(ki - k1);
}
static inline float ember_exp_neg(float z) {
    // exp(-z) for z >= 0 (clamped at 87, where exp underflows anyway): no overflow to guard;
    // a NaN z passes the clamp and makes the result NaN
    float x = -(z > 87.0f ? 87.0f : z);
    float k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = __builtin_fmaf(-k, 0.693145751953125f, x);
    r = __builtin_fmaf(-k, 1.428606765330187e-06f, r);
    float p = 1.0f / 720.0f;
    p = __builtin_fmaf(p, r, 1.0f / 120.0f);
    p = __builtin_fmaf(p, r, 1.0f / 24.0f);
    p = __builtin_fmaf(p, r, 1.0f / 6.0f);
    p = __builtin_fmaf(p, r, 0.5f);
    p = __builtin_fmaf(p, r, 1.0f);
    p = __builtin_fmaf(p, r, 1.0f);
    return p * ember_pow2i((int32_t)k);
}
static inline float ember_erff(float x) {
    float a = x < 0.0f ? -x : x;
    float z = a * a;
    float s = -0.0006196492616395824f;
    s = __builtin_fmaf(s, z, 0.0050320619837431494f);
    s = __builtin_fmaf(s, z, -0.026792137261490497f);
    s = __builtin_fmaf(s, z, 0.1128249316237058f);
    s = __builtin_fmaf(s, z, -0.37612555789721264f);
    s = __builtin_fmaf(s, z, 1.1283791585406622f);
    float small = a * s;
    float t = 1.0f / __builtin_fmaf(0.5f, a, 1.0f);
    float q = -0.2173567570900125f;
    q = __builtin_fmaf(q, t, 0.6006717066618817f);
    q = __builtin_fmaf(q, t, -0.026233615452080552f);
    q = __builtin_fmaf(q, t, 0.37669872724871595f);
    q = __builtin_fmaf(q, t, 0.2649368540341325f);
    q = __builtin_fmaf(q, t, 0.0012821435061869952f);
    float large = __builtin_fmaf(-ember_exp_neg(z), q, 1.0f);
    // ordered so that a NaN (every comparison false) takes `small`, which is NaN
    float r = a >= 4.2f ? 1.0f : (a >= 0.9f ? large : small);
    return x < 0.0f ? -r : r;
}
// log, log2, log10, log1p and tanh of float32 as straight-line code, so `omp simd` loops vectorise
// them (the same maths as ember-core's csrc/pointwise.cpp kernels, so compiled log and tanh give the
// eager C++ kernels' bits). log: x = 2^e m with m in [sqrt(1/2), sqrt(2)) (subnormals scaled first),
// f = m - 1 (exact), s = f / (2 + f), log m = 2 atanh(s) = f - s (f - R(s^2)) with R the atanh series
// to s^10, e ln2 added in two parts: within 1 ulp. log2/log10/log1p: the same series in float64
// (ember_log_wide, relative error ~1e-12) scaled and rounded once: within 1 ulp. tanh: in float64,
// 1 - 2 / (e^(2|x|) + 1) with x's sign (ember_exp_wide: a degree-10 Taylor polynomial after range
// reduction), and x - x^3/3 + 2x^5/15 below 2^-8 where the subtraction would cancel: within 1 ulp.
static inline uint32_t ember_float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline float ember_bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline uint64_t ember_double_bits(double d) { uint64_t u; std::memcpy(&u, &d, 8); return u; }
static inline double ember_bits_double(uint64_t u) { double d; std::memcpy(&d, &u, 8); return d; }
static inline float ember_logf(float x) {
    const bool subnormal = x < 0x1p-126f;
    const uint32_t u = ember_float_bits(subnormal ? x * 0x1p23f : x);
    const uint32_t v = u + (0x3f800000u - 0x3f3504f3u);  // exponent of x / sqrt(1/2)
    const int32_t e = (int32_t)(v >> 23) - 127 - (subnormal ? 23 : 0);
    const float f = ember_bits_float((v & 0x7fffffu) + 0x3f3504f3u) - 1.0f;
    const float s = f / (2.0f + f);
    const float z = s * s;
    float R = 2.0f / 11;
    R = R * z + 2.0f / 9;
    R = R * z + 2.0f / 7;
    R = R * z + 2.0f / 5;
    R = R * z + 2.0f / 3;
    R = R * z;
    const float half_f2 = 0.5f * f * f;
    const float log_m = f - (half_f2 - s * (half_f2 + R));
    const float ef = (float)e;
    const float result = (ef * -2.12194440e-4f + log_m) + ef * 0.693359375f;
    const float special = x == 0.0f ? -std::numeric_limits<float>::infinity() :
        (x == std::numeric_limits<float>::infinity() ? x : result);
    return x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : (x != x ? x : special);
}
// log of a positive, finite, normal double (every float is one), relative error ~1e-12
static inline double ember_log_wide(double x) {
    const uint64_t v = ember_double_bits(x) + (0x3ff0000000000000ull - 0x3fe6a09e667f3bcdull);
    // the exponent as a double without an int64 -> double conversion (AVX2 has no vector form)
    const double e = ember_bits_double((v >> 52) | 0x4330000000000000ull) - (0x1p52 + 1023.0);
    const double f = ember_bits_double((v & 0xfffffffffffffull) + 0x3fe6a09e667f3bcdull) - 1.0;
    const double s = f / (2.0 + f);
    const double z = s * s;
    double p = 1.0 / 13;
    p = p * z + 1.0 / 11;
    p = p * z + 1.0 / 9;
    p = p * z + 1.0 / 7;
    p = p * z + 1.0 / 5;
    p = p * z + 1.0 / 3;
    p = p * z + 1.0;
    return e * 0.6931471805599453094 + 2.0 * s * p;
}
// the float result of a log-like function: `wide` for positive finite x, else the limits
static inline float ember_log_special(float x, float zero_at, double wide) {
    const float inf = std::numeric_limits<float>::infinity();
    const float r = x == zero_at ? -inf : (x == inf ? inf : (float)wide);
    return x < zero_at ? std::numeric_limits<float>::quiet_NaN() : (x != x ? x : r);
}
static inline float ember_log2f(float x) {
    const double d = x > 0.0f && x < std::numeric_limits<float>::infinity() ? (double)x : 1.0;
    return ember_log_special(x, 0.0f, ember_log_wide(d) * 1.4426950408889634074);
}
static inline float ember_log10f(float x) {
    const double d = x > 0.0f && x < std::numeric_limits<float>::infinity() ? (double)x : 1.0;
    return ember_log_special(x, 0.0f, ember_log_wide(d) * 0.43429448190325182765);
}
static inline float ember_log1pf(float x) {
    // 1 + x is exact in float64 for |x| >= 2^-12 (up to 2^24 below 2^53: rounding only far above);
    // below, the series x - x^2/2 + x^3/3 - x^4/4 (keeps -0.0 and tiny x exact)
    const double d = x;
    const double u = x > -1.0f && x < std::numeric_limits<float>::infinity() ? 1.0 + d : 2.0;
    const double series = d * (1.0 + d * (-0.5 + d * (1.0 / 3 - d * 0.25)));
    const double wide = (d < 0x1p-12 && d > -0x1p-12) ? series : ember_log_wide(u);
    return ember_log_special(x, -1.0f, wide);
}
static inline double ember_exp_wide(double x) {  // e^x for 0 <= x <= 40
    const double shifter = 0x1.8p52;
    const double k = x * 0x1.71547652b82fep0 + shifter;
    const double n = k - shifter;
    const double r = x - n * 0x1.62e42fefa39efp-1;
    double p = 1.0 / 3628800;
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
    return p * ember_bits_double((ember_double_bits(k) - ember_double_bits(shifter) + 1023) << 52);
}
static inline float ember_tanhf(float xf) {
    const double x = xf;
    const double a = x < 0 ? -x : x;
    const double e = ember_exp_wide(a < 20.0 ? 2.0 * a : 40.0);  // tanh(20) rounds to 1
    const double big = 1.0 - 2.0 / (e + 1.0);
    const double z = x * x;
    const double small = x * (1.0 + z * (-1.0 / 3 + z * (2.0 / 15)));  // -0.0 stays -0.0
    const double result = a < 0x1p-8 ? small : (x < 0 ? -big : big);
    return xf != xf ? xf : (float)result;
}
// sin and cos of float32 in float64 arithmetic, for every finite argument without a branch or a table
// (so loops vectorise): |x| (2/pi) mod 4 from 2/pi written as nine 26-bit chunks K_i (234 bits):
// each |x| K_i is exact (24 x 26 bits) and reduced mod 4 exactly, and the terms are summed as a
// double-double, so the reduced argument keeps ~50 bits even for x near a multiple of pi/2 (the
// Payne-Hanek idea without its table look-up); then sin/cos of r in [-pi/4, pi/4] by their Taylor
// polynomials (truncation < 1e-13) and the quadrant. Within 1 ulp (the float rounding of a
// float64 result accurate to ~1e-13).
static inline void ember_two_sum(double a, double b, double& s, double& e) {
    s = a + b;
    const double bb = s - a;
    e = (a - (s - bb)) + (b - bb);
}
static inline double ember_mod4(double t) { return t - 4.0 * std::floor(t * 0.25); }
static inline void ember_reduce_pio2(float xf, double& r, int32_t& quadrant) {
    const double d = std::fabs((double)xf);
    const double low = d * 0x1.8eaf7ap-210 + d * 0x1.07f944p-186 + d * 0x1.278872p-157;
    double sh = ember_mod4(d * 0x1.45f3068p-1), sl = 0.0, e;
    ember_two_sum(sh, ember_mod4(d * 0x1.7272208p-27), sh, e); sl += e;
    ember_two_sum(sh, ember_mod4(d * 0x1.4a7f09p-54), sh, e); sl += e;
    ember_two_sum(sh, ember_mod4(d * 0x1.abe8fa8p-79), sh, e); sl += e;
    ember_two_sum(sh, ember_mod4(d * 0x1.a6ee06p-107), sh, e); sl += e;
    ember_two_sum(sh, d * 0x1.b62959p-132, sh, e); sl += e;  // below 4 from here: no mod
    ember_two_sum(sh, low, sh, e); sl += e;
    const double k = (sh + 0x1.8p52) - 0x1.8p52;  // nearest integer
    const double f = (sh - k) + sl;  // |f| <= 1/2
    r = f * 1.5707963267948966192;
    quadrant = (int32_t)ember_mod4(k);
}
static inline double ember_sin_poly(double r) {
    const double z = r * r;
    double p = 1.0 / 6227020800.0;
    p = p * z - 1.0 / 39916800.0;
    p = p * z + 1.0 / 362880.0;
    p = p * z - 1.0 / 5040.0;
    p = p * z + 1.0 / 120.0;
    p = p * z - 1.0 / 6.0;
    return r + r * z * p;
}
static inline double ember_cos_poly(double r) {
    const double z = r * r;
    double p = -1.0 / 87178291200.0;
    p = p * z + 1.0 / 479001600.0;
    p = p * z - 1.0 / 3628800.0;
    p = p * z + 1.0 / 40320.0;
    p = p * z - 1.0 / 720.0;
    p = p * z + 1.0 / 24.0;
    p = p * z - 0.5;
    return 1.0 + z * p;
}
static inline float ember_sinf(float x) {
    double r; int32_t q;
    ember_reduce_pio2(x, r, q);
    const double s = ember_sin_poly(r), c = ember_cos_poly(r);
    double v = (q & 1) ? c : s;
    v = (q & 2) ? -v : v;
    const float mag = (float)v;  // sin(-x) = -sin(x): x's sign bit applied last (keeps -0.0)
    return ember_bits_float(ember_float_bits(mag) ^ (ember_float_bits(x) & 0x80000000u));
}
static inline float ember_cosf(float x) {
    double r; int32_t q;
    ember_reduce_pio2(x, r, q);
    const double s = ember_sin_poly(r), c = ember_cos_poly(r);
    double v = (q & 1) ? s : c;
    v = ((q + 1) & 2) ? -v : v;
    return (float)v;
}
#define EMBER_FLOAT_FUNCTION(NAME, FLOAT_FN)                                                   \
    template <typename T> static inline T ember_##NAME(T x) {                                   \
        if constexpr (std::is_same<T, float>::value) return FLOAT_FN(x); else return std::NAME(x); \
    }
EMBER_FLOAT_FUNCTION(log, ember_logf)
EMBER_FLOAT_FUNCTION(log2, ember_log2f)
EMBER_FLOAT_FUNCTION(log10, ember_log10f)
EMBER_FLOAT_FUNCTION(log1p, ember_log1pf)
EMBER_FLOAT_FUNCTION(tanh, ember_tanhf)
EMBER_FLOAT_FUNCTION(sin, ember_sinf)
EMBER_FLOAT_FUNCTION(cos, ember_cosf)
#undef EMBER_FLOAT_FUNCTION
template <typename T> static inline T ember_exp(T x) {
    if constexpr (std::is_same<T, float>::value) return ember_expf(x); else return std::exp(x);
}
template <typename T> static inline T ember_erf(T x) {
    if constexpr (std::is_same<T, float>::value) return ember_erff(x); else return std::erf(x);
}
template <typename T> static inline T ember_maximum(T a, T b) {
    return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
}
template <typename T> static inline T ember_minimum(T a, T b) {
    return (a != a) ? a : ((b != b) ? b : (a < b ? a : b));
}
// NaN-propagating max/min as OpenMP reductions, so `omp simd` vectorises them (order-free: NaN wins)
#pragma omp declare reduction(ember_max_f : float : omp_out = ember_maximum<float>(omp_out, omp_in)) \
    initializer(omp_priv = -std::numeric_limits<float>::infinity())
#pragma omp declare reduction(ember_min_f : float : omp_out = ember_minimum<float>(omp_out, omp_in)) \
    initializer(omp_priv = std::numeric_limits<float>::infinity())
#pragma omp declare reduction(ember_max_d : double : omp_out = ember_maximum<double>(omp_out, omp_in)) \
    initializer(omp_priv = -std::numeric_limits<double>::infinity())
#pragma omp declare reduction(ember_min_d : double : omp_out = ember_minimum<double>(omp_out, omp_in)) \
    initializer(omp_priv = std::numeric_limits<double>::infinity())
// Integer division by zero raises in eager ("ZeroDivisionError"); here it sets the calling segment's
// flag ``err`` (a local of the segment entry, which returns it: one per call, so concurrent calls of
// a library cannot see or clear each other's error) and gives 0 instead of trapping.
template <typename T> static inline bool ember_zero_divisor(T b, int* err) {
    if (b == 0) { __atomic_store_n(err, 1, __ATOMIC_RELAXED); return true; }
    return false;
}
// MIN / -1 overflows (undefined in C++, a trap on x86); eager wraps, as numpy does: MIN // -1 is MIN
// and MIN % -1 is 0. Any a / -1 is -a computed in unsigned arithmetic, which wraps.
template <typename T> static inline bool ember_minus_one(T b) {
    if constexpr (std::is_signed<T>::value) return b == T(-1); else return false;
}
template <typename T> static inline T ember_negate(T a) {
    if constexpr (std::is_signed<T>::value) {
        using U = typename std::make_unsigned<T>::type;
        return static_cast<T>(static_cast<U>(0) - static_cast<U>(a));
    } else {
        return a;  // not reached: only signed types divide by -1
    }
}
template <typename T> static inline T ember_idiv(T a, T b, int* err) {
    if (ember_zero_divisor(b, err)) return T(0);
    return ember_minus_one(b) ? ember_negate(a) : T(a / b);
}
template <typename T> static inline T ember_imod(T a, T b, int* err) {
    if (ember_zero_divisor(b, err)) return T(0);
    return ember_minus_one(b) ? T(0) : T(a % b);
}
template <typename T> static inline T ember_floordiv(T a, T b, int* err) {
    // floats as eager (numpy's floor_divide): from fmod, so inf // 2 is nan and 3 // -inf is -1
    if constexpr (std::is_floating_point<T>::value) {
        (void)err;
        if (b == 0) return a / b;
        T mod = std::fmod(a, b);
        T div = (a - mod) / b;
        if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
        if (div == 0) return std::copysign(T(0), a / b);
        T whole = std::floor(div);
        return (div - whole > T(0.5)) ? whole + 1 : whole;
    }
    else {
        if (ember_zero_divisor(b, err)) return 0;
        if (ember_minus_one(b)) return ember_negate(a);
        T q = a / b; T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
    }
}
template <typename T> static inline T ember_remainder(T a, T b, int* err) {
    if constexpr (std::is_floating_point<T>::value) {
        // a zero remainder is +0 whatever the signs, as eager gives it
        (void)err;
        T r = std::fmod(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : (r == 0 ? T(0) : r);
    }
    else {
        if (ember_zero_divisor(b, err)) return 0;
        if (ember_minus_one(b)) return 0;
        T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }
}
// Float to integer as eager converts (numpy on x86): truncation toward zero in range; out of range
// or NaN gives the "integer indefinite" value of the 64- or 32-bit conversion (INT_MIN), and narrower
// types keep the low bits of the 32-bit result (300.0 -> uint8 44). A plain static_cast is undefined
// out of range, and GCC then folds (float)(uint8_t)x into trunc(x).
template <typename T> static inline T ember_f2i(double x) {
    if constexpr (sizeof(T) == 8) {
        bool in_range = x >= -9223372036854775808.0 && x < 9223372036854775808.0;
        return in_range ? static_cast<T>(x) : static_cast<T>(INT64_MIN);
    } else {
        int32_t v = (x >= -2147483648.0 && x < 2147483648.0) ? static_cast<int32_t>(x) : INT32_MIN;
        return static_cast<T>(v);
    }
}
// Integer to float. With -fno-trapping-math GCC folds (float)(int32_t)x into trunc(x), which keeps
// the -0.0 of x = -0.5 (an integer converts to +0); the tie test survives folding (signed zeros are
// honoured) and turns such a -0 back into +0.
template <typename F, typename I> static inline F ember_i2f(I v) {
    F r = static_cast<F>(v);
    return r == 0 ? F(0) : r;
}
template <typename T> static inline T ember_ipow(T a, T b) {
    if constexpr (std::is_floating_point<T>::value) { return std::pow(a, b); }
    else {
        if (b < 0) return (a == 1) ? 1 : ((a == -1) ? ((b % 2) ? -1 : 1) : 0);
        T r = 1; while (b) { if (b & 1) r *= a; a *= a; b >>= 1; } return r;
    }
}
template <typename T> static inline T ember_sign(T a) {
    if constexpr (std::is_floating_point<T>::value) {
        return (T)((T(0) < a) - (a < T(0)));  // NaN and -0 give +0, as eager's sign does
    }
    else { return (T)((T(0) < a) - (a < T(0))); }
}
"""

#: The in-kernel random number functions (Philox), appended to a source only when a kernel calls them:
#: they hold AVX2 intrinsics (``immintrin.h``) and triple the build time of a small library (about 0.5 ->
#: 1.6 s), which every graph without random ops would otherwise pay.
RANDOM_PRELUDE = r"""
// Random numbers computed in the kernel (ember._inductor.inkernel_random). The words of random node
// `stream` form one stream W[m], m >= 0: word m & 3 of the Philox4x32-10 block (Salmon et al., SC'11) of
// counter (lo32(m >> 2), hi32(m >> 2), stream, 0) under key (lo32(seed), hi32(seed)). Element i of a
// uniform uses W[i], element i of a normal W[2i] and W[2i+1]; the uniform of a word w is (w >> 8) * 2^-24.
// ember_philox_u(seed, m, stream) is the uniform of W[m]. A block gives four words, so on AVX2 the
// functions keep the last blocks computed per thread (a memo per stream & 3, keyed by seed, stream and
// position): a loop walking m in order computes each block once. The memo only saves work; any order
// gives W[m].
static inline void ember_philox_block(int64_t seed, uint64_t block, int64_t stream, uint32_t w[4]) {
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32);
    uint32_t c2 = (uint32_t)stream, c3 = 0u;
    uint32_t k0 = (uint32_t)(uint64_t)seed, k1 = (uint32_t)((uint64_t)seed >> 32);
#pragma GCC unroll 10
    for (int r = 0; r < 10; ++r) {  // a 32x32->64 product gives both halves
        const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    w[0] = c0;
    w[1] = c1;
    w[2] = c2;
    w[3] = c3;
}
static inline float ember_philox_u24(uint32_t w) { return (float)(int32_t)(w >> 8) * 5.9604644775390625e-08f; }
#if defined(__AVX2__) && !defined(__AVX512F__) && defined(_OPENMP)
#include <immintrin.h>
// the last block a thread computed for a stream (AVX2's scalar calls: loop tails, loops gcc keeps scalar)
struct ember_philox_memo1 { int64_t seed, stream; uint64_t block; bool ready; uint32_t w[4]; };
static thread_local ember_philox_memo1 ember_philox_last[4];
static inline float ember_philox_word(int64_t seed, int64_t m, int64_t stream) {
    const uint64_t block = (uint64_t)m >> 2;
    ember_philox_memo1& memo = ember_philox_last[stream & 3];
    if (!memo.ready || memo.block != block || memo.seed != seed || memo.stream != stream) {
        ember_philox_block(seed, block, stream, memo.w);
        memo.seed = seed;
        memo.stream = stream;
        memo.block = block;
        memo.ready = true;
    }
    return ember_philox_u24(memo.w[m & 3]);
}
// AVX2: gcc vectorises the scalar form poorly (the high half of a 32-bit product becomes lane shuffles),
// so the `omp simd` loops call an 8-lane version written with vector extensions: gcc calls a function
// declared `declare simd` through its vector variant (_ZGVdN8uvu_<name>: seed and stream uniform, the
// eight int64 word positions in two ymm registers, eight floats returned in one), as it calls libmvec's.
// On a miss it computes sixteen consecutive blocks (64 words: two interleaved chains of 8 lanes, as one
// chain of rounds is latency-bound) and keeps them: the next seven calls of an in-order loop of uniforms
// (three of normals, which read two words an element) load their words from there.
typedef uint32_t ember_u32x8 __attribute__((vector_size(32)));
typedef int32_t ember_i32x8 __attribute__((vector_size(32)));
typedef int64_t ember_i64x4 __attribute__((vector_size(32)));
typedef float ember_f32x8 __attribute__((vector_size(32)));
extern "C" {
#pragma omp declare simd notinbranch simdlen(8) uniform(seed, stream)
__attribute__((const, nothrow, visibility("hidden"))) float ember_philox_u(int64_t seed, int64_t m, int64_t stream);
}
// the scalar function, defined under its assembler name (a definition gcc saw as `declare simd` would
// get gcc's own vector variants)
__attribute__((visibility("hidden"))) float ember_philox_u_s(int64_t, int64_t, int64_t) __asm__("ember_philox_u");
float ember_philox_u_s(int64_t seed, int64_t m, int64_t stream) { return ember_philox_word(seed, m, stream); }
// the high and low 32 bits of the eight products a * m: even lanes by one 32x32->64 multiply, odd lanes by
// another, blended (no 32-bit low multiply: it is slow on several CPUs)
static inline void ember_mulhilo8(ember_u32x8 a, __m256i m, ember_u32x8& hi, ember_u32x8& lo) {
    const __m256i even = _mm256_mul_epu32((__m256i)a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64((__m256i)a, 32), m);
    hi = (ember_u32x8)_mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
    lo = (ember_u32x8)_mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}
// the four words of N x 8 blocks whose counters' low and high halves are (c0[v], c1[v]): N independent
// chains interleaved, as one chain of rounds is latency-bound
template <int N>
static inline void ember_philox8(int64_t seed, ember_u32x8 (&c0)[N], ember_u32x8 (&c1)[N], int64_t stream,
                                 ember_u32x8 (&w)[4][N]) {
    ember_u32x8 c2[N], c3[N];
    for (int v = 0; v < N; ++v) {
        c2[v] = (ember_u32x8){} + (uint32_t)stream;
        c3[v] = (ember_u32x8){};
    }
    uint32_t k0 = (uint32_t)(uint64_t)seed, k1 = (uint32_t)((uint64_t)seed >> 32);
    const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
#pragma GCC unroll 10
    for (int r = 0; r < 10; ++r) {
#pragma GCC unroll 4
        for (int v = 0; v < N; ++v) {
            ember_u32x8 hi0, lo0, hi1, lo1;
            ember_mulhilo8(c0[v], m0, hi0, lo0);
            ember_mulhilo8(c2[v], m1, hi1, lo1);
            c0[v] = hi1 ^ (c1[v] ^ k0);
            c2[v] = hi0 ^ (c3[v] ^ k1);
            c1[v] = lo1;
            c3[v] = lo0;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    for (int v = 0; v < N; ++v) {
        w[0][v] = c0[v];
        w[1][v] = c1[v];
        w[2][v] = c2[v];
        w[3][v] = c3[v];
    }
}
// words first .. first + 63 of a stream (first a multiple of 4), the last a thread computed for it
struct alignas(32) ember_philox_memo8 { uint32_t w[64]; int64_t seed, stream, first; bool ready; };
static thread_local ember_philox_memo8 ember_philox_run[4];
// the 32 words of eight blocks (four words of 8 lanes each) to memory in stream order (a 4 x 8 transpose)
static inline void ember_philox_store_words(uint32_t* out, const ember_u32x8 (&w)[4]) {
    const __m256i t0 = _mm256_unpacklo_epi32((__m256i)w[0], (__m256i)w[1]);  // blocks 0, 1 | 4, 5: words 0, 1
    const __m256i t1 = _mm256_unpackhi_epi32((__m256i)w[0], (__m256i)w[1]);  // blocks 2, 3 | 6, 7
    const __m256i t2 = _mm256_unpacklo_epi32((__m256i)w[2], (__m256i)w[3]);  // words 2, 3
    const __m256i t3 = _mm256_unpackhi_epi32((__m256i)w[2], (__m256i)w[3]);
    const __m256i b04 = _mm256_unpacklo_epi64(t0, t2), b15 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i b26 = _mm256_unpacklo_epi64(t1, t3), b37 = _mm256_unpackhi_epi64(t1, t3);
    _mm256_storeu_si256((__m256i*)out, _mm256_permute2x128_si256(b04, b15, 0x20));
    _mm256_storeu_si256((__m256i*)(out + 8), _mm256_permute2x128_si256(b26, b37, 0x20));
    _mm256_storeu_si256((__m256i*)(out + 16), _mm256_permute2x128_si256(b04, b15, 0x31));
    _mm256_storeu_si256((__m256i*)(out + 24), _mm256_permute2x128_si256(b26, b37, 0x31));
}
static inline void ember_philox_fill8(ember_philox_memo8& memo, int64_t seed, int64_t first, int64_t stream) {
    const uint64_t block = (uint64_t)first >> 2;
    const ember_u32x8 iota = {0, 1, 2, 3, 4, 5, 6, 7}, lo = (ember_u32x8){} + (uint32_t)block;
    ember_u32x8 c0[2], c1[2], w[4][2];
    for (int v = 0; v < 2; ++v) {
        c0[v] = lo + iota + (uint32_t)(8 * v);
        c1[v] = (ember_u32x8){} + (uint32_t)(block >> 32) - (ember_u32x8)(c0[v] < lo);  // the carry: a lane wrapped
    }
    ember_philox8<2>(seed, c0, c1, stream, w);
    for (int v = 0; v < 2; ++v) {
        const ember_u32x8 words[4] = {w[0][v], w[1][v], w[2][v], w[3][v]};
        ember_philox_store_words(memo.w + 32 * v, words);
    }
    memo.seed = seed;
    memo.stream = stream;
    memo.first = first;
    memo.ready = true;
}
// whether the eight positions (lo, hi) are lo[0] + step * (0, 1, ..., 7)
static inline bool ember_philox_strided(__m256i lo, __m256i hi, int64_t step) {
    const __m256i want = _mm256_add_epi64(_mm256_set1_epi64x(_mm256_extract_epi64(lo, 0)),
                                          _mm256_setr_epi64x(0, step, 2 * step, 3 * step));
    const __m256i same = _mm256_and_si256(
        _mm256_cmpeq_epi64(lo, want), _mm256_cmpeq_epi64(hi, _mm256_add_epi64(want, _mm256_set1_epi64x(4 * step))));
    return _mm256_movemask_epi8(same) == -1;
}
// the memo's words at positions (lo, hi) (two int64 vectors of four) when a loop reads the stream in
// order: i .. i + 7 (uniforms) or 2i, 2i + 2, .., 2i + 14 and 2i + 1, .., 2i + 15 (normals); else false
static inline bool ember_philox_read8(const ember_philox_memo8& memo, __m256i lo, __m256i hi, __m256i& words) {
    const int64_t r0 = _mm256_extract_epi64(lo, 0) - memo.first;
    if ((uint64_t)r0 <= 56 && ember_philox_strided(lo, hi, 1)) {
        words = _mm256_loadu_si256((const __m256i*)(memo.w + r0));
        return true;
    }
    if ((uint64_t)r0 <= 48 && ember_philox_strided(lo, hi, 2)) {  // the even words of 16
        const __m256 a = _mm256_loadu_ps((const float*)(memo.w + r0));
        const __m256 b = _mm256_loadu_ps((const float*)(memo.w + r0 + 8));
        words = _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(a, b, 0x88)), 0xD8);
        return true;
    }
    return false;
}
// the words at positions (lo, hi) when the memo has not got them: the eight blocks from lane 0's on (a
// loop in order moved past the memo), or a block per lane (positions in another order)
static __attribute__((noinline)) __m256i ember_philox_miss8(ember_philox_memo8& memo, int64_t seed, __m256i lo,
                                                           __m256i hi, int64_t stream) {
    ember_philox_fill8(memo, seed, _mm256_extract_epi64(lo, 0) & ~(int64_t)3, stream);
    __m256i words;
    if (ember_philox_read8(memo, lo, hi, words)) return words;
    ember_u32x8 c0[1], c1[1], w[4][1];
    ember_i32x8 sel;
    for (int k = 0; k < 8; ++k) {
        const uint64_t m = (uint64_t)(k < 4 ? ((ember_i64x4)lo)[k] : ((ember_i64x4)hi)[k - 4]);
        c0[0][k] = (uint32_t)(m >> 2);
        c1[0][k] = (uint32_t)(m >> 34);
        sel[k] = (int32_t)(m & 3);
    }
    ember_philox8<1>(seed, c0, c1, stream, w);
    return (__m256i)((w[0][0] & (ember_u32x8)(sel == 0)) | (w[1][0] & (ember_u32x8)(sel == 1))
                     | (w[2][0] & (ember_u32x8)(sel == 2)) | (w[3][0] & (ember_u32x8)(sel == 3)));
}
extern "C" __attribute__((visibility("hidden")))
ember_f32x8 _ZGVdN8uvu_ember_philox_u(int64_t seed, ember_i64x4 lo, ember_i64x4 hi, int64_t stream) {
    ember_philox_memo8& memo = ember_philox_run[stream & 3];
    __m256i words;
    const bool mine = memo.ready && memo.seed == seed && memo.stream == stream;
    if (!(mine && ember_philox_read8(memo, (__m256i)lo, (__m256i)hi, words)))
        words = ember_philox_miss8(memo, seed, (__m256i)lo, (__m256i)hi, stream);
    const ember_i32x8 bits = (ember_i32x8)((ember_u32x8)words >> 8);
    return __builtin_convertvector(bits, ember_f32x8) * 5.9604644775390625e-08f;
}
#else
// elsewhere a block per call, straight-line (the word picked by selects): `omp simd` vectorises it, which
// a memo's branches and stores would prevent
static inline float ember_philox_u(int64_t seed, int64_t m, int64_t stream) {
    uint32_t w[4];
    ember_philox_block(seed, (uint64_t)m >> 2, stream, w);
    const int64_t j = m & 3;
    return ember_philox_u24(j == 0 ? w[0] : (j == 1 ? w[1] : (j == 2 ? w[2] : w[3])));
}
#endif
// element `offset` of a uniform: W[offset]
static inline float ember_philox_rand(int64_t seed, int64_t offset, int64_t stream) {
    return ember_philox_u(seed, offset, stream);
}
// element `offset` of a standard normal: Box-Muller of the uniforms of W[2 offset] and W[2 offset + 1]
// (words 2j and 2j + 1 of block offset >> 1, j = offset & 1; 1 - u0 > 0: the log is finite)
static inline float ember_philox_randn(int64_t seed, int64_t offset, int64_t stream) {
    const float u0 = ember_philox_u(seed, 2 * offset, stream), u1 = ember_philox_u(seed, 2 * offset + 1, stream);
    return std::sqrt(-2.0f * ember_log<float>(1.0f - u0)) * ember_cos<float>(6.2831853071795864769f * u1);
}
"""


# --------------------------------------------------------------------------------------------
# index expressions


def cindex(expr):
    """C code of an integer SymPy index expression (int64 arithmetic)."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        v = int(expr)
        return f"INT64_C({v})" if abs(v) > 2**31 - 1 else str(v)
    if expr.is_Symbol:
        return expr.name
    if isinstance(expr, sympy.Add):
        terms = [cindex(a) for a in expr.args]
        return "(" + " + ".join(terms) + ")"
    if isinstance(expr, sympy.Mul):
        return "(" + " * ".join(cindex(a) for a in expr.args) + ")"
    if isinstance(expr, ir.FloorDiv):
        return f"({cindex(expr.args[0])} / {cindex(expr.args[1])})"
    if isinstance(expr, ir.ModIndex):
        return f"({cindex(expr.args[0])} % {cindex(expr.args[1])})"
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp > 0:  # s0**2: a dynamic size squared
        return "(" + " * ".join([cindex(expr.base)] * int(expr.exp)) + ")"
    if isinstance(expr, sympy.Max):
        return _fold("std::max<int64_t>", [cindex(a) for a in expr.args])
    if isinstance(expr, sympy.Min):
        return _fold("std::min<int64_t>", [cindex(a) for a in expr.args])
    raise NotImplementedError(f"index expression {expr!r}")


def _fold(fn, args):
    out = args[0]
    for a in args[1:]:
        out = f"{fn}({out}, {a})"
    return out


def index_bounds(expr, ranges):
    """``(lo, hi)``: integer bounds of index ``expr`` when each symbol ``v`` lies in ``[0, ranges[v])``,
    or None where a symbol's range is unknown or the expression is not one this reasons about."""
    if expr.is_Integer:
        return int(expr), int(expr)
    if expr.is_Symbol:
        size = ranges.get(expr)
        return (0, size - 1) if size else None
    if isinstance(expr, (sympy.Add, sympy.Mul, sympy.Min, sympy.Max)):
        parts = [index_bounds(a, ranges) for a in expr.args]
        if any(p is None for p in parts):
            return None
        lo, hi = parts[0]
        for a, b in parts[1:]:
            if isinstance(expr, sympy.Add):
                lo, hi = lo + a, hi + b
            elif isinstance(expr, sympy.Mul):
                products = (lo * a, lo * b, hi * a, hi * b)
                lo, hi = min(products), max(products)
            elif isinstance(expr, sympy.Min):
                lo, hi = min(lo, a), min(hi, b)
            else:
                lo, hi = max(lo, a), max(hi, b)
        return lo, hi
    if isinstance(expr, (ir.FloorDiv, ir.ModIndex)) and expr.args[1].is_Integer and int(expr.args[1]) > 0:
        q = int(expr.args[1])
        inner = index_bounds(expr.args[0], ranges)
        if inner is None or inner[0] < 0:
            return None
        if isinstance(expr, ir.FloorDiv):
            return inner[0] // q, inner[1] // q
        return (inner[0], inner[1]) if inner[1] < q else (0, q - 1)
    return None


def simplify_index(expr, ranges):
    """``expr`` with ``Min``/``Max``/``FloorDiv``/``ModIndex`` resolved where the loop ranges decide them.

    A padded or reshaped view's index clamps with ``Min(255, x3)`` and splits with ``FloorDiv``/``ModIndex``;
    with ``x3 < 256`` the clamp is ``x3``, and ``FloorDiv(256*x1 + x3, 64)`` is ``4*x1 + FloorDiv(x3, 64)``, so
    the C++ indexes contiguously along the inner loop and vectorises.

    Args:
        expr (sympy.Expr): a non-negative integer index expression.
        ranges (dict[sympy.Symbol, int]): loop variables and their trip counts (``v`` in ``[0, n)``).

    Returns:
        sympy.Expr: an equal expression for every point of the ranges.
    """
    if expr.is_Atom:
        return expr
    args = [simplify_index(a, ranges) for a in expr.args]
    if isinstance(expr, (sympy.Min, sympy.Max)):
        bounds = [index_bounds(a, ranges) for a in args]
        is_min = isinstance(expr, sympy.Min)
        for a, b in zip(args, bounds):
            if b is None:
                continue
            # a decides when it is below (Min) / above (Max) every other argument everywhere
            others = [o for o in bounds if o is not b]
            if all(o is not None and (b[1] <= o[0] if is_min else b[0] >= o[1]) for o in others):
                return a
        return expr.func(*args)
    if isinstance(expr, (ir.FloorDiv, ir.ModIndex)) and args[1].is_Integer and int(args[1]) > 0:
        return _simplify_div_mod(type(expr), args[0], int(args[1]), ranges)
    return expr.func(*args)


def _simplify_div_mod(kind, a, q, ranges):
    """``a // q`` or ``a % q`` with the terms of ``a`` that are multiples of ``q`` taken out."""
    whole, rest = sympy.Integer(0), sympy.Integer(0)
    for term in sympy.Add.make_args(sympy.expand(a)):
        coeff, _ = term.as_coeff_Mul()
        if coeff.is_Integer and int(coeff) % q == 0:
            whole += term
        else:
            rest += term
    rest_bounds = index_bounds(rest, ranges)
    if rest_bounds is None or rest_bounds[0] < 0:
        return kind(a, q)
    if rest_bounds[1] < q:  # 0 <= rest < q: the quotient is whole / q, the remainder rest
        return sympy.expand(whole / q) if kind is ir.FloorDiv else rest
    if kind is ir.FloorDiv:
        return sympy.expand(whole / q) + ir.FloorDiv(rest, q)
    return ir.ModIndex(rest, q)


# --------------------------------------------------------------------------------------------
# expressions


def constant(value, dtype):
    """The C++ literal of Python number ``value`` as ``dtype`` (inf/nan as ``numeric_limits``)."""
    t = value_ctype(dtype)
    if isinstance(value, sympy.Basic) and not value.is_Number:  # a value over the dynamic sizes
        return f"static_cast<{t}>({cindex(value)})"
    if not isinstance(value, (bool, int, float)) and hasattr(value, "cpp"):  # dynamic.SizeFloat: 1/n, ...
        return f"static_cast<{t}>({value.cpp(cindex(value.expr))})"
    if dtype == ember.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        v = float(value)
        if math.isnan(v):
            return f"std::numeric_limits<{t}>::quiet_NaN()"
        if math.isinf(v):
            return f"{'-' if v < 0 else ''}std::numeric_limits<{t}>::infinity()"
        text = repr(v)
        return f"{text}f" if t == "float" else text
    return f"static_cast<{t}>(INT64_C({int(value)}))"


#: Unary ops with a straight-line (vectorisable) float32 form in PRELUDE, ``ember_<name><T>``.
_VECTOR_FLOAT = ("exp", "erf", "log", "log2", "log10", "log1p", "tanh", "sin", "cos")
_UNARY_STD = {"exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2", "log10": "log10",
              "log1p": "log1p", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
              "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "asinh",
              "acosh": "acosh", "atanh": "atanh", "erfc": "erfc", "lgamma": "lgamma"}
_BINARY_INFIX = {"add": "+", "sub": "-", "mul": "*", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
                 "gt": ">", "ge": ">=", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
                 "lshift": "<<", "rshift": ">>"}


def op_code(e, args):
    """C code of IR op ``e`` given its arguments' code."""
    name = e.name
    t = value_ctype(e.dtype)
    arg_dtype = e.args[0].dtype if e.args else e.dtype
    at = value_ctype(arg_dtype)
    is_float = arg_dtype.is_floating_point
    a = args[0] if args else None
    b = args[1] if len(args) > 1 else None
    if name in _BINARY_INFIX:
        if e.dtype == ember.bool and name in ("add", "mul", "sub"):
            return {"add": f"({a} || {b})", "mul": f"({a} && {b})", "sub": f"({a} != {b})"}[name]
        return f"static_cast<{t}>({a} {_BINARY_INFIX[name]} {b})"
    if name in _VECTOR_FLOAT:
        return f"ember_{name}<{at}>({a})" if is_float else f"static_cast<{t}>(std::{name}({a}))"
    if name in _UNARY_STD:
        return f"static_cast<{t}>(std::{_UNARY_STD[name]}({a}))"
    if name == "truediv":
        return f"static_cast<{t}>({a} / {b})" if is_float else f"ember_idiv<{at}>({a}, {b}, ember_err)"
    if name == "floordiv":
        return f"ember_floordiv<{at}>({a}, {b}, ember_err)"
    if name in ("remainder", "mod"):
        return f"ember_remainder<{at}>({a}, {b}, ember_err)"
    if name == "fmod":
        return f"static_cast<{t}>(std::fmod({a}, {b}))" if is_float else f"ember_imod<{at}>({a}, {b}, ember_err)"
    if name == "neg":
        return f"static_cast<{t}>(-{a})" if e.dtype != ember.bool else a
    if name == "abs":
        return f"std::abs({a})" if is_float else f"static_cast<{t}>({a} < 0 ? -{a} : {a})"
    if name == "rsqrt":
        return f"static_cast<{t}>(1 / std::sqrt({a}))"
    if name == "reciprocal":
        return f"static_cast<{t}>(1 / {a})"
    if name == "sigmoid":
        return f"static_cast<{t}>(1 / (1 + ember_exp<{at}>(-{a})))"
    if name in ("floor", "ceil", "trunc", "round"):
        if not is_float:
            return a
        fn = "nearbyint" if name == "round" else name
        return f"static_cast<{t}>(std::{fn}({a}))"
    if name == "sign":
        return f"ember_sign<{at}>({a})"
    if name == "pow":
        return f"ember_ipow<{at}>({a}, {b})"
    if name in ("maximum", "minimum"):
        if is_float:
            return f"ember_{name}<{at}>({a}, {b})"
        return f"std::{name[:3]}<{at}>({a}, {b})"
    if name in ("fmax", "fmin"):
        return f"static_cast<{t}>(std::{name}({a}, {b}))" if is_float else f"std::{name[1:]}<{at}>({a}, {b})"
    if name in ("atan2", "copysign", "hypot"):
        return f"static_cast<{t}>(std::{name}({a}, {b}))"
    if name == "logical_and":
        return f"(({a} != 0) && ({b} != 0))"
    if name == "logical_or":
        return f"(({a} != 0) || ({b} != 0))"
    if name == "logical_xor":
        return f"(({a} != 0) != ({b} != 0))"
    if name == "logical_not":
        return f"({a} == 0)"
    if name == "bitwise_not":
        return f"(!{a})" if arg_dtype == ember.bool else f"static_cast<{t}>(~{a})"
    if name == "isnan":
        return f"({a} != {a})" if is_float else "false"
    if name == "isinf":
        return f"std::isinf({a})" if is_float else "false"
    if name == "isfinite":
        return f"std::isfinite({a})" if is_float else "true"
    if name == "where":
        return f"({a} ? {b} : {args[2]})"
    if name == "to_dtype":
        return convert(a, arg_dtype, e.dtype)
    if name in ir.RANDOM_OPS:
        return f"ember_{name}({a}, {b}, {args[2]})"
    raise NotImplementedError(f"C++ codegen has no rule for op {name!r}")


def convert(code, src, dst):
    """Convert a value computed as ``src`` to a value of ``dst`` (half types round here)."""
    if dst == ember.bool:
        return f"({code} != 0)"
    if dst == ember.float16:
        return f"ember_h2f(ember_f2h(static_cast<float>({code})))"
    if dst == ember.bfloat16:
        return f"ember_b2f(ember_f2b(static_cast<float>({code})))"
    if src.is_floating_point and not dst.is_floating_point and not dst.is_complex:
        return f"ember_f2i<{value_ctype(dst)}>(static_cast<double>({code}))"
    if dst.is_floating_point and not src.is_floating_point and src != ember.bool:
        return f"ember_i2f<{value_ctype(dst)}>({code})"
    if dst.is_floating_point and src == ember.bool:
        # a select, not a cast: a bool-to-float cast makes gcc size the loop's vectors by the 1-byte bool,
        # which keeps it from calling 8-lane vector functions (the Philox ones) in the loop
        t = value_ctype(dst)
        return f"({code} ? static_cast<{t}>(1) : static_cast<{t}>(0))"
    return f"static_cast<{value_ctype(dst)}>({code})"


def store_code(code, dtype):
    """The stored form of a value of the buffer's compute dtype."""
    if dtype == ember.float16:
        return f"ember_f2h({code})"
    if dtype == ember.bfloat16:
        return f"ember_f2b({code})"
    return code


class ExprPrinter:
    """Emits statements for expression trees, sharing equal subexpressions (CSE) within a scope."""

    def __init__(self, kernel_gen, lines, indent):
        self.k = kernel_gen
        self.lines = lines
        self.indent = indent
        self.memo = {}

    def emit(self, e):
        """Emits the statements computing IR expression ``e``; returns the C name (or literal) of its value."""
        key = self.k.keys(e)
        if key in self.memo:
            return self.memo[key]
        if isinstance(e, ir.Constant):
            code = constant(e.value, e.dtype)
            self.memo[key] = code
            return code
        if isinstance(e, ir.IndexExpr):
            code = f"static_cast<{value_ctype(e.dtype)}>({cindex(e.expr)})"
        elif isinstance(e, ir.Load):
            code = self.k.load_code(e)
        else:
            code = op_code(e, [self.emit(a) for a in e.args])
        name = self.k.tmp()
        self.lines.append(f"{self.indent}{value_ctype(e.dtype)} {name} = {code};")
        self.memo[key] = name
        return name



# --------------------------------------------------------------------------------------------
# kernels


_INIT = {"sum": 0, "prod": 1, "any": False, "all": True}


def _reduction_init(rtype, dtype):
    t = value_ctype(dtype)
    if rtype in _INIT:
        return constant(_INIT[rtype], dtype)
    if rtype in ("max", "argmax"):
        return f"-std::numeric_limits<{t}>::infinity()" if dtype.is_floating_point else \
            f"std::numeric_limits<{t}>::lowest()"
    if dtype.is_floating_point:
        return f"std::numeric_limits<{t}>::infinity()"
    return f"std::numeric_limits<{t}>::max()"


def _combine(rtype, acc, v, dtype):
    t = value_ctype(dtype)
    if rtype == "sum":
        return f"{acc} = ({acc} || {v});" if dtype == ember.bool else f"{acc} = {acc} + {v};"
    if rtype == "prod":
        return f"{acc} = ({acc} && {v});" if dtype == ember.bool else f"{acc} = {acc} * {v};"
    if rtype == "any":
        return f"{acc} = {acc} || {v};"
    if rtype == "all":
        return f"{acc} = {acc} && {v};"
    fn = "maximum" if rtype == "max" else "minimum"
    if dtype.is_floating_point:
        return f"{acc} = ember_{fn}<{t}>({acc}, {v});"
    return f"{acc} = std::{fn[:3]}<{t}>({acc}, {v});"


def _subexpressions(expr):
    """``expr`` and every expression below it."""
    out = [expr]
    if isinstance(expr, ir.Op):
        for a in expr.args:
            out += _subexpressions(a)
    return out


def _sibling_reductions(first, following):
    """The reductions directly after ``first`` in ``following`` that can share its loop: the same
    reduction ranges, each vectorisable, none reading another's result."""
    def fits(node):
        data = node.buffer.data
        return node.is_reduction and not node.inner_ranges and \
            _simd_reduction(data.reduction_type, node.body.dtype) is not None and \
            list(data.reduction_ranges) == list(first.buffer.data.reduction_ranges)

    if not fits(first):
        return []
    group, names = [], {first.buffer.name}
    for node in following:
        if not fits(node) or any(ld.buffer.name in names for ld in ir.loads(node.body)):
            break
        group.append(node)
        names.add(node.buffer.name)
    return group


def _simd_reduction(rtype, dtype):
    """The OpenMP reduction identifier that vectorises ``rtype`` on ``dtype``, or None."""
    if dtype == ember.bool:
        return None
    if rtype in ("sum", "prod"):
        return "+" if rtype == "sum" else "*"
    if rtype in ("max", "min"):
        if dtype in (ember.float64,):
            return f"ember_{rtype}_d"
        if dtype.is_floating_point:
            return f"ember_{rtype}_f"
        return rtype
    return None


def kernel_work(kernel):
    """The elements ``kernel`` (a scheduled ``FusedKernel``) visits, an int from the size hints (dynamic sizes at
    their hints): its outer iterations times its longest reduction. Decides threads only, never values."""
    outer = math.prod(ir.size_hint(s) for s in kernel.ranges)
    return outer * max(
        (math.prod(ir.size_hint(s) for s in n.buffer.data.reduction_ranges) for n in kernel.nodes if n.is_reduction),
        default=1)


def segment_work(kernels):
    """The elements a segment's kernels visit together (:data:`SEGMENT_PARALLEL_WORK`)."""
    return sum(kernel_work(k) for k in kernels)


class KernelGen:
    """C++ for one :class:`~ember._inductor.scheduler.FusedKernel`."""

    def __init__(self, kernel, slots, keys=None, index_code=None):
        self.kernel = kernel
        self.slots = slots  # buffer name -> slot index
        # the structural keys of expressions (common subexpressions, reused summands): one memo per source
        self.keys = keys if keys is not None else StructuralKeys()
        # (index, strides, loop ranges, split variables) -> C code (see index): one memo per source
        self.index_code = index_code if index_code is not None else {}
        self._tmp = 0
        self.read = {}
        self.written = {}
        self.locals = {n.buffer.name for n in kernel.nodes if n.local}
        # trip counts of the loop variables in scope (outer x.., plus r../y.. while a loop over them is emitted)
        self.ranges = {v: int(r) for v, r in zip(kernel.vars, kernel.ranges) if sympy.sympify(r).is_Integer}
        self.subs = {}  # a loop variable written in terms of split loop variables (_pointwise_kernel)
        self.reused = {}  # structural key of a summand -> the node whose buffer holds it (_summand_reused)

    def index(self, index, strides):
        """C code of the flat offset of ``index`` under ``strides``, simplified for the loops in scope.

        A function of its arguments, the loops' ranges and the split variables alone: memoised, since
        kernels load the same elements again and again and SymPy's simplification is slow (issue 28)."""
        key = (tuple(index), tuple(strides), frozenset(self.ranges.items()), frozenset(self.subs.items()))
        code = self.index_code.get(key)
        if code is None:
            code = self.index_code[key] = self._index(index, strides)
        return code

    def _index(self, index, strides):
        flat = ir.flat_index(index, strides)
        if self.subs and flat.has(ir.FloorDiv, ir.ModIndex):
            flat = sympy.expand(flat.xreplace(self.subs))
        if flat.has(sympy.Min, sympy.Max, ir.FloorDiv, ir.ModIndex):
            flat = ir.merge_div_mod(sympy.expand(simplify_index(flat, self.ranges)))
        return cindex(flat)

    def in_loops(self, symbols, sizes):
        """Context: ``symbols`` run over ``sizes`` while the body of their loop is emitted."""
        gen = self

        class _Scope:
            def __enter__(self):
                self.saved = dict(gen.ranges)
                for v, n in zip(symbols, sizes):
                    n = sympy.sympify(n)
                    if n.is_Integer:
                        gen.ranges[v] = int(n)
                    else:
                        gen.ranges.pop(v, None)

            def __exit__(self, *exc):
                gen.ranges = self.saved

        return _Scope()

    def tmp(self):
        """A fresh temporary name (``t1``, ``t2``, ...)."""
        self._tmp += 1
        return f"t{self._tmp}"

    def load_code(self, e):
        """C code reading :class:`~ember._inductor.ir.Load` ``e`` (half types widened to float)."""
        buf = e.buffer
        if buf.name in self.locals:
            return f"{buf.name}_v"
        self.read[buf.name] = buf
        code = f"{buf.name}[{self.index(e.index, buf.strides)}]"
        if buf.dtype == ember.float16:
            return f"ember_h2f({code})"
        if buf.dtype == ember.bfloat16:
            return f"ember_b2f({code})"
        return code

    def store(self, node, value, lines, indent):
        """Appends to ``lines`` the store of C value ``value`` to ``node``'s buffer (a local for fused-away ones)."""
        buf = node.buffer
        if node.local:
            if buf.dtype in _HALF:  # round as a store to memory would
                value = convert(value, ember.float32, buf.dtype)
            lines.append(f"{indent}{value_ctype(buf.dtype)} {buf.name}_v = {value};")
            return
        self.written[buf.name] = buf
        offset = self.index(node.index, buf.strides)
        lines.append(f"{indent}{buf.name}[{offset}] = {store_code(value, buf.dtype)};")

    def generate(self):
        """The kernel's C++ function (``static void <name>(bufs, nthreads, ember_err)``)."""
        k = self.kernel
        body = []
        if any(n.is_reduction for n in k.nodes):
            self._reduction_kernel(body)
        else:
            self._pointwise_kernel(body)
        head = [f"static void {k.name}(void** bufs, int nthreads, int* ember_err) {{"]
        for name, buf in sorted(self.read.items()):
            if name in self.written:
                continue
            t = ctype(buf.dtype)
            head.append(f"    const {t}* __restrict {name} = (const {t}*)bufs[{self.slots[name]}];")
        for name, buf in sorted(self.written.items()):
            t = ctype(buf.dtype)
            head.append(f"    {t}* __restrict {name} = ({t}*)bufs[{self.slots[name]}];")
        for key, slot in sorted(self.slots.items()):  # dynamic sizes: integers in the pointer table
            if key.startswith("sym:"):
                head.append(f"    const int64_t {key[4:]} = (int64_t)(intptr_t)bufs[{slot}]; (void){key[4:]};")
        head.append("    (void)nthreads; (void)ember_err;")
        return "\n".join(head + body + ["}"])

    def _loops(self, lines, parallel, simd_inner, work, loop_vars=None, loop_ranges=None):
        """Open the kernel's outer loops (or ``loop_vars`` over ``loop_ranges``); returns the indent inside."""
        k = self.kernel
        loop_vars = k.vars if loop_vars is None else loop_vars
        loop_ranges = k.ranges if loop_ranges is None else loop_ranges
        n = len(loop_ranges)
        indent = "    "
        par = parallel and work >= PARALLEL_THRESHOLD and n > 0
        for d, (v, size) in enumerate(zip(loop_vars, loop_ranges)):
            pragma = None
            if d == 0 and par:
                collapse = n - 1 if simd_inner else n
                pragma = "#pragma omp parallel for num_threads(nthreads)"
                if collapse > 1:
                    pragma += f" collapse({collapse})"
                if simd_inner and n == 1:
                    pragma = "#pragma omp parallel for simd num_threads(nthreads)"
            elif d == n - 1 and simd_inner:
                pragma = "#pragma omp simd"
            if pragma:
                lines.append(indent + pragma)
            lines.append(f"{indent}for (int64_t {v} = 0; {v} < {cindex(size)}; ++{v}) {{")
            indent += "    "
        return indent

    def _close(self, lines, depth=None):
        for d in reversed(range(len(self.kernel.ranges) if depth is None else depth)):
            lines.append("    " * (d + 1) + "}")

    def _pointwise_kernel(self, lines):
        k = self.kernel
        split = self._inner_split()
        if split is None:
            indent = self._loops(lines, True, True, kernel_work(k))
        else:  # the inner loop as (x // q, x % q): contiguous runs of q that vectorise
            x, q = split
            size = sympy.sympify(k.ranges[-1])
            outer, inner = sympy.Symbol(f"{x.name}o", integer=True), sympy.Symbol(f"{x.name}i", integer=True)
            self.ranges[inner] = q
            if size.is_Integer:
                self.ranges[outer] = int(size) // q
            self.subs = {x: q * outer + inner}
            indent = self._loops(lines, True, True, kernel_work(k), [*k.vars[:-1], outer, inner],
                                 [*k.ranges[:-1], ir.FloorDiv(size, q), q])
            lines.append(f"{indent}const int64_t {x.name} = {q} * {outer.name} + {inner.name};")
        printer = ExprPrinter(self, lines, indent)
        for node in k.nodes:
            self.store(node, printer.emit(node.body), lines, indent)
        self._close(lines, None if split is None else len(k.ranges) + 1)
        self.subs = {}

    def _inner_split(self):
        """``(x, q)`` when the kernel's loads or stores index by ``x // q`` / ``x % q`` of its innermost
        variable ``x`` (a reshape that splits the last dim: attention's heads), ``q`` dividing its
        range and long enough to vectorise; else None."""
        k = self.kernel
        if not k.ranges:
            return None
        x, size = k.vars[-1], sympy.sympify(k.ranges[-1])
        divisors = set()
        for node in k.nodes:
            accesses = [(ld.index, ld.buffer.strides) for ld in ir.loads(node.body)
                        if ld.buffer.name not in self.locals]
            if not node.local:
                accesses.append((node.index, node.buffer.strides))
            for index, strides in accesses:
                flat = simplify_index(ir.flat_index(index, strides), self.ranges)
                for e in flat.atoms(ir.FloorDiv, ir.ModIndex):
                    if x in e.args[0].free_symbols:
                        if e.args[0] != x or not e.args[1].is_Integer:
                            return None
                        divisors.add(int(e.args[1]))
        if len(divisors) != 1:
            return None
        q = divisors.pop()
        # a dynamic size: split where the hint divides, assuming every size does (checked per call)
        return (x, q) if q >= 8 and ir.assume(sympy.Eq(ir.ModIndex(size, q), 0)) else None

    def _reduction_kernel(self, lines):
        k = self.kernel
        work = kernel_work(k)
        if not k.ranges and work >= PARALLEL_THRESHOLD:
            self._scalar_kernel(lines)
            return
        if self._column_reduction():
            self._column_kernel(lines, work)
            return
        indent = self._loops(lines, True, False, work)
        printer = ExprPrinter(self, lines, indent)
        nodes = list(k.nodes)
        while nodes:
            node = nodes.pop(0)
            if node.inner_ranges:
                group = [node]
                while nodes and nodes[0].inner_ranges == node.inner_ranges:
                    group.append(nodes.pop(0))
                self._inner_loop(group, lines, indent, printer)
                continue
            if node.is_reduction:
                group = [node] + _sibling_reductions(node, nodes)
                if len(group) > 1:
                    del nodes[:len(group) - 1]
                    for member, value in zip(group, self._reduce_together(group, lines, indent, printer)):
                        self.store(member, value, lines, indent)
                    continue
                keep = self._summand_reused(node, nodes)
                value = self._reduce(node, lines, indent, printer, keep=keep)
            else:
                value = printer.emit(node.body)
            self.store(node, value, lines, indent)
        self._close(lines)

    def _summand_reused(self, node, following):
        """The later output node (an inner loop over this sum's range) whose value uses this sum's
        summand, or None. Softmax is ``exp(x - max) / sum(exp(x - max))``: the sum's loop then stores
        each ``exp`` in the output and the output's loop reads it back instead of computing it again.
        Only for an output in memory of the summand's (non-half) dtype, so the stored value is exact."""
        data = node.buffer.data
        if data.reduction_type != "sum" or not isinstance(node.body, ir.Op) or node.body.dtype in _HALF or \
                node.body.dtype == ember.bool or node.inner_ranges:
            return None
        rvars = ir.reduction_vars(len(data.reduction_ranges))
        for later in following:
            if not later.inner_ranges or later.local or later.buffer.dtype != node.body.dtype or \
                    list(later.inner_ranges) != list(data.reduction_ranges):
                continue
            ys = ir.index_vars(len(later.inner_ranges), "y")
            key = self.keys(ir.substitute(node.body, dict(zip(rvars, ys))))
            if any(self.keys(e) == key for e in _subexpressions(later.body)):
                self.reused[key] = later
                return later
        return None

    def _column_reduction(self):
        """Whether this kernel's nodes are reductions over the same leading dims that read memory
        contiguously along the last OUTER dim (``x.sum(0)`` of a row-major matrix), none reading another:
        then the loops are interchanged (see _column_kernel)."""
        k = self.kernel
        if not k.ranges:
            return False
        names = {n.buffer.name for n in k.nodes}
        first = k.nodes[0].buffer.data
        x_last = k.vars[-1]
        along_x = False
        for node in k.nodes:
            data = node.buffer.data
            if not node.is_reduction or data.reduction_type not in ("sum", "prod", "max", "min") or \
                    node.body.dtype == ember.bool or not data.reduction_ranges or \
                    list(data.reduction_ranges) != list(first.reduction_ranges):
                return False
            r_last = ir.reduction_vars(len(data.reduction_ranges))[-1]
            for ld in ir.loads(node.body):
                if ld.buffer.name in names:
                    return False
                flat = ir.flat_index(ld.index, ld.buffer.strides)
                cx, cr = flat.coeff(x_last), flat.coeff(r_last)
                # a load contiguous along the reduced dim is a row reduction's, unless it is the same for
                # every output of a block (cx == 0: a per-row statistic such as layer_norm's mean)
                if cx not in (0, 1) or (cr == 1 and cx != 0):
                    return False
                along_x = along_x or cx == 1
        return along_x

    def _column_block(self, size):
        """Outputs per block: COLUMN_BLOCK, or fewer so that a static ``size`` splits into at least four
        blocks (the blocks are what the threads share: 256 columns in one block ran on one thread)."""
        if not isinstance(size, int) or self.kernel.ranges[:-1]:
            return COLUMN_BLOCK
        quarter = -(-size // 4)
        return max(16, min(COLUMN_BLOCK, -(-quarter // 16) * 16))

    def _column_kernel(self, lines, work):
        """Reductions over leading dims: blocks of COLUMN_BLOCK outputs along the last outer dim keep one
        accumulator each; the reduced dims run outside a contiguous (simd) loop over the block."""
        k = self.kernel
        data = k.nodes[0].buffer.data
        n = len(k.ranges)
        xs = k.vars
        x_last, size = xs[-1], cindex(k.ranges[-1])
        last = sympy.sympify(k.ranges[-1])
        block = self._column_block(int(last) if last.is_Integer else None)
        indent = "    "
        if work >= PARALLEL_THRESHOLD:
            collapse = f" collapse({n})" if n > 1 else ""
            lines.append(f"{indent}#pragma omp parallel for num_threads(nthreads){collapse}")
        for v, r in zip(xs[:-1], k.ranges[:-1]):
            lines.append(f"{indent}for (int64_t {v} = 0; {v} < {cindex(r)}; ++{v}) {{")
            indent += "    "
        lines.append(f"{indent}for (int64_t xb = 0; xb < {size}; xb += {block}) {{")
        indent += "    "
        lines.append(f"{indent}const int64_t xe = std::min<int64_t>(xb + {block}, {size});")
        accs = []
        for node in k.nodes:
            dtype = node.body.dtype
            acc = "acc_" + self.tmp()
            accs.append(acc)
            lines.append(f"{indent}{value_ctype(dtype)} {acc}[{block}];")
            lines.append(f"{indent}for (int64_t j = 0; j < {block}; ++j) {acc}[j] = "
                         f"{_reduction_init(node.buffer.data.reduction_type, dtype)};")
        rvars = ir.reduction_vars(len(data.reduction_ranges))
        inner = indent
        for v, r in zip(rvars, data.reduction_ranges):
            lines.append(f"{inner}for (int64_t {v} = 0; {v} < {cindex(r)}; ++{v}) {{")
            inner += "    "
        lines.append(f"{inner}#pragma omp simd")
        lines.append(f"{inner}for (int64_t {x_last} = xb; {x_last} < xe; ++{x_last}) {{")
        scope = ExprPrinter(self, lines, inner + "    ")
        for node, acc in zip(k.nodes, accs):
            with self.in_loops(rvars, data.reduction_ranges):
                value = scope.emit(node.body)
            rtype = node.buffer.data.reduction_type
            lines.append(f"{inner}    {_combine(rtype, f'{acc}[{x_last} - xb]', value, node.body.dtype)}")
        lines.append(f"{inner}}}")
        for d in reversed(range(len(rvars))):
            lines.append(indent + "    " * d + "}")
        lines.append(f"{indent}for (int64_t {x_last} = xb; {x_last} < xe; ++{x_last}) {{")
        for node, acc in zip(k.nodes, accs):
            result = f"{acc}[{x_last} - xb]"
            if node.body.dtype != node.buffer.dtype:
                result = convert(result, node.body.dtype, node.buffer.dtype)
            self.store(node, result, lines, indent + "    ")
        lines.append(f"{indent}}}")
        for d in reversed(range(n)):  # the block loop and the outer loops
            lines.append("    " * (d + 1) + "}")

    def _inner_loop(self, group, lines, indent, printer):
        """Pointwise nodes over the outer iteration's extra dims ``y0..``: one loop nest, simd inside."""
        ranges = group[0].inner_ranges
        ys = ir.index_vars(len(ranges), "y")
        for node in group:
            self._hoist(node.body, set(ys), printer)
        inner = indent
        for d, (v, size) in enumerate(zip(ys, ranges)):
            if d == len(ys) - 1:
                lines.append(f"{inner}#pragma omp simd")
            lines.append(f"{inner}for (int64_t {v} = 0; {v} < {cindex(size)}; ++{v}) {{")
            inner += "    "
        scope = ExprPrinter(self, lines, inner)
        scope.memo = dict(printer.memo)
        with self.in_loops(ys, ranges):
            for key, node in self.reused.items():  # summands a reduction loop stored: read back
                if node in group:
                    scope.memo[key] = f"{node.buffer.name}[{self.index(node.index, node.buffer.strides)}]"
            for node in group:
                self.store(node, scope.emit(node.body), lines, inner)
        for d in reversed(range(len(ys))):
            lines.append(indent + "    " * d + "}")

    def _scalar_kernel(self, lines):
        """A kernel without outer loops: each large reduction is split in fixed chunks run in parallel."""
        printer = ExprPrinter(self, lines, "    ")
        nodes = list(self.kernel.nodes)
        while nodes:
            node = nodes.pop(0)
            if node.inner_ranges:  # a buffer fused in horizontally: its own loop nest (not one scalar)
                group = [node]
                while nodes and nodes[0].inner_ranges == node.inner_ranges:
                    group.append(nodes.pop(0))
                self._inner_loop(group, lines, "    ", printer)
                continue
            data = node.buffer.data
            if node.is_reduction and data.reduction_type not in ("argmax", "argmin") and \
                    data.reduction_ranges and ir.size_hint(data.reduction_ranges[0]) >= REDUCTION_SPLIT:
                value = self._split_reduction(lines, node, printer)
            elif node.is_reduction:
                value = self._reduce(node, lines, "    ", printer)
            else:
                value = printer.emit(node.body)
            self.store(node, value, lines, "    ")

    def _reduce(self, node, lines, indent, printer, r0_range=None, raw=False, keep=None):
        """Emit the loops of one reduction; returns the accumulator's name. ``keep``: a node whose
        buffer also receives each summand (see _summand_reused)."""
        data = node.buffer.data
        rtype = data.reduction_type
        dtype = node.body.dtype
        t = value_ctype(dtype)
        acc = self.tmp()
        lines.append(f"{indent}{t} {acc} = {_reduction_init(rtype, dtype)};")
        arg = rtype in ("argmax", "argmin")
        if arg:
            lines.append(f"{indent}int64_t {acc}_i = 0;")
        rvars = ir.reduction_vars(len(data.reduction_ranges))
        self._hoist(node.body, set(rvars), printer)
        inner = indent
        for d, (v, size) in enumerate(zip(rvars, data.reduction_ranges)):
            if d == len(rvars) - 1:
                clause = _simd_reduction(rtype, dtype)
                if clause:
                    lines.append(f"{inner}#pragma omp simd reduction({clause}:{acc})")
            lo, hi = ("0", cindex(size)) if (d > 0 or r0_range is None) else r0_range
            lines.append(f"{inner}for (int64_t {v} = {lo}; {v} < {hi}; ++{v}) {{")
            inner += "    "
        scope = ExprPrinter(self, lines, inner)
        scope.memo = dict(printer.memo)  # values computed outside the loop stay valid inside
        with self.in_loops(rvars, data.reduction_ranges):
            value = scope.emit(node.body)
        if arg:
            flat = cindex(ir.flat_index(rvars, ir.contiguous_strides(data.reduction_ranges))) if rvars else "0"
            better = ">" if rtype == "argmax" else "<"
            cond = f"({value} != {value} || {value} {better} {acc})" if dtype.is_floating_point else \
                f"({value} {better} {acc})"
            guard = f"!({acc} != {acc}) && " if dtype.is_floating_point else ""
            lines.append(f"{inner}if ({guard}{cond}) {{ {acc} = {value}; {acc}_i = {flat}; }}")
        else:
            lines.append(f"{inner}{_combine(rtype, acc, value, dtype)}")
        if keep is not None:
            ys = ir.index_vars(len(keep.inner_ranges), "y")
            with self.in_loops(rvars, data.reduction_ranges):
                where = tuple(sympy.sympify(i).xreplace(dict(zip(ys, rvars))) for i in keep.index)
                self.written[keep.buffer.name] = keep.buffer
                lines.append(f"{inner}{keep.buffer.name}[{self.index(where, keep.buffer.strides)}] = {value};")
        for d in reversed(range(len(rvars))):
            lines.append(indent + "    " * d + "}")
        if arg:
            return f"{acc}_i"
        return convert(acc, dtype, node.buffer.dtype) if dtype != node.buffer.dtype and not raw else acc

    def _reduce_together(self, group, lines, indent, printer):
        """One loop nest for sibling reductions over the same ranges (``sum(d)`` and ``sum(d * d)`` of a
        one-pass variance): each element is read once, and the accumulators are independent chains.
        Returns each node's result."""
        rvars = ir.reduction_vars(len(group[0].buffer.data.reduction_ranges))
        ranges = group[0].buffer.data.reduction_ranges
        accs, clauses = [], []
        for node in group:
            rtype, dtype = node.buffer.data.reduction_type, node.body.dtype
            acc = self.tmp()
            lines.append(f"{indent}{value_ctype(dtype)} {acc} = {_reduction_init(rtype, dtype)};")
            self._hoist(node.body, set(rvars), printer)
            accs.append(acc)
            clauses.append(f"reduction({_simd_reduction(rtype, dtype)}:{acc})")
        if any(node.body.dtype == ember.float64 for node in group):
            # 8 lanes a step: two AVX2 vectors of doubles, so each sum is two independent add chains
            # (the float32 -> float64 sums of a one-pass variance ran 25% faster on the norm row)
            clauses.append("simdlen(8)")
        inner = indent
        for d, (v, size) in enumerate(zip(rvars, ranges)):
            if d == len(rvars) - 1:
                lines.append(f"{inner}#pragma omp simd {' '.join(clauses)}")
            lines.append(f"{inner}for (int64_t {v} = 0; {v} < {cindex(size)}; ++{v}) {{")
            inner += "    "
        scope = ExprPrinter(self, lines, inner)  # shared: a subexpression of several bodies is computed once
        scope.memo = dict(printer.memo)
        with self.in_loops(rvars, ranges):
            for node, acc in zip(group, accs):
                value = scope.emit(node.body)
                lines.append(f"{inner}{_combine(node.buffer.data.reduction_type, acc, value, node.body.dtype)}")
        for d in reversed(range(len(rvars))):
            lines.append(indent + "    " * d + "}")
        return [convert(acc, node.body.dtype, node.buffer.dtype) if node.body.dtype != node.buffer.dtype else acc
                for node, acc in zip(group, accs)]

    def _hoist(self, expr, rvars, printer):
        """Emit, before a reduction loop, the ops of ``expr`` that do not depend on its ``rvars``."""
        if not isinstance(expr, ir.Op):
            return
        if not (ir.free_symbols(expr) & rvars):
            printer.emit(expr)
            return
        for a in expr.args:
            self._hoist(a, rvars, printer)

    def _split_reduction(self, lines, node, printer):
        """A full reduction in REDUCTION_SPLIT fixed chunks of r0, combined in order; returns the value."""
        data = node.buffer.data
        dtype = node.body.dtype
        t = value_ctype(dtype)
        size = cindex(data.reduction_ranges[0])
        partial = "partial_" + self.tmp()
        lines.append(f"    {t} {partial}[{REDUCTION_SPLIT}];")
        lines.append("    #pragma omp parallel for num_threads(nthreads) schedule(static)")
        lines.append(f"    for (int64_t chunk = 0; chunk < {REDUCTION_SPLIT}; ++chunk) {{")
        lo = f"(chunk * {size}) / {REDUCTION_SPLIT}"
        hi = f"((chunk + 1) * {size}) / {REDUCTION_SPLIT}"
        inner = ExprPrinter(self, lines, "        ")
        inner.memo = dict(printer.memo)
        acc = self._reduce(node, lines, "        ", inner, r0_range=(lo, hi), raw=True)
        lines.append(f"        {partial}[chunk] = {acc};")
        lines.append("    }")
        total = self.tmp()
        lines.append(f"    {t} {total} = {partial}[0];")
        lines.append(f"    for (int chunk = 1; chunk < {REDUCTION_SPLIT}; ++chunk) {{")
        lines.append(f"        {_combine(data.reduction_type, total, f'{partial}[chunk]', dtype)}")
        lines.append("    }")
        return convert(total, dtype, node.buffer.dtype) if dtype != node.buffer.dtype else total


def generate(scheduler, slots):
    """C++ source for ``scheduler``'s kernels.

    Args:
        scheduler: a :class:`~ember._inductor.scheduler.Scheduler`.
        slots (dict[str, int]): the pointer-table slot of each buffer in memory.

    Returns:
        (str, list[str | ExternKernel]): the source, and the steps: segment entry names and the
        extern calls between them, in order.
    """
    parts = []
    steps = []
    segment = []
    keys = StructuralKeys()  # kernels load at many of the same indices: each printed once
    index_code = {}  # and compute many of the same offsets (KernelGen.index)

    def close_segment():
        if not segment:
            return
        name = f"segment{sum(1 for s in steps if isinstance(s, str))}"
        calls = "\n".join(f"    {k.name}(bufs, nthreads, &ember_err);" for k in segment)
        # a small segment stays on the calling thread (SEGMENT_PARALLEL_WORK)
        serial = "    nthreads = 1;  // a small segment\n" if segment_work(segment) < SEGMENT_PARALLEL_WORK else ""
        # the entry returns its own integer-division-by-zero flag: per call, safe across threads
        parts.append(f'extern "C" int {name}(void** bufs, int nthreads) {{\n    int ember_err = 0;\n'
                     f'{serial}{calls}\n    return ember_err;\n}}')
        steps.append(name)
        segment.clear()

    for step in scheduler.steps:
        if isinstance(step, ir.ExternKernel):
            close_segment()
            steps.append(step)
            continue
        parts.append(KernelGen(step, slots, keys, index_code).generate())
        segment.append(step)
    close_segment()
    preludes = [PRELUDE, RANDOM_PRELUDE] if any("ember_philox" in part for part in parts) else [PRELUDE]
    return "\n\n".join(preludes + parts) + "\n", steps
