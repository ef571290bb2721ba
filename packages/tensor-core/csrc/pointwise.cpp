// ember._C's CPU pointwise kernels (ember/_ops/_cpu_pointwise.py is their Python side).
//
// A kernel takes its output and inputs as numpy arrays of any strides; inputs broadcast to
// the output's shape (a missing or size-1 dim reads with stride 0). Before computing, the
// loop (struct Loop) is brought to a small canonical form, as PyTorch's TensorIterator does:
// dims of size 1 are dropped, the dims are ordered by the output's strides (largest first,
// so a transposed output is written in memory order), and neighbouring dims that every
// operand steps through as one (stride[d] == stride[d + 1] * shape[d + 1]) are merged. What
// is left is a set of rows of the innermost dim; pointwise_loops.h has the loops over one
// row, with their own cases for contiguous operands and for an operand broadcast along the
// row (a scalar, or a column: `x + y` with x of shape [m, n] and y of shape [m, 1]).
//
// Values are those of numpy's functions, bit for bit: float16 and bfloat16 are computed in
// float32 and rounded once (numpy's float16 loops and ml_dtypes' bfloat16 do the same, with
// the same rounding: to nearest, ties to even; NaN kept as numpy/ml_dtypes keep it);
// integers wrap around; maximum/minimum/clamp follow numpy's NaN and signed-zero choices.
// This file is compiled with -ffp-contract=off (CMakeLists.txt): a fused multiply-add in
// `a + alpha * b` would round once where numpy rounds twice.
//
// Speed: the loops are compiled twice, for AVX2 and for the x86-64 baseline (pointwise_loops.h
// is included under each target), and the best one the CPU supports is chosen at import
// (set_pointwise_isa switches, for tests). OpenMP splits the flat iteration space into one
// contiguous range per thread above kParallelWork elements; each element is computed the
// same way whichever thread takes it, so the results don't depend on the thread count.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#ifdef EMBER_HAS_OPENMP
#include <omp.h>
#endif

namespace py = pybind11;

namespace {

// Elements below which a kernel runs on one thread: a parallel region costs more.
constexpr int64_t kParallelWork = 1 << 15;
constexpr int kMaxDims = 64;  // numpy's limit
constexpr int kMaxOperands = 4;

int max_threads() {
#ifdef EMBER_HAS_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

#define EMBER_PW_INLINE inline __attribute__((always_inline))

// ---- element types ------------------------------------------------------------------------
// float16 and bfloat16 are 16 bits with their own conversions to and from float32.

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// dtype codes shared with _cpu_pointwise.py
#define EMBER_PW_DTYPES(X) \
  X(0, bool)               \
  X(1, uint8_t)            \
  X(2, int8_t)             \
  X(3, int16_t)            \
  X(4, int32_t)            \
  X(5, int64_t)            \
  X(6, Half)               \
  X(7, BFloat16)           \
  X(8, float)              \
  X(9, double)

template <typename T>
struct Compute {
  using type = T;
};
template <>
struct Compute<Half> {
  using type = float;
};
template <>
struct Compute<BFloat16> {
  using type = float;
};

EMBER_PW_INLINE uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

EMBER_PW_INLINE float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

EMBER_PW_INLINE float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));  // inf, NaN (payload kept)
  if (e != 0) return bits_float(sign | ((e + 112u) << 23) | (m << 13));
  const float sub = float(m) * 0x1p-24f;  // zero or subnormal: exact
  return sign ? -sub : sub;
}

// Round to nearest, ties to even. NaN keeps the top 10 bits of its payload (quiet or not, as
// numpy), made nonzero so that it stays a NaN.
EMBER_PW_INLINE uint16_t float_to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {
    const uint16_t m = uint16_t((a & 0x7fffffu) >> 13);
    return sign | 0x7c00u | (m ? m : 1u);
  }
  if (a >= 0x47800000u) return sign | 0x7c00u;  // 2**16 and above (and inf): inf
  if (a < 0x38800000u) {
    // below the smallest normal half (2**-14): count units of 2**-24 (exact), round to an integer
    // by adding and removing 2**23 (the sum rounds to nearest even); 1024 is the smallest normal
    const float units = bits_float(a) * 0x1p24f;
    return sign | uint16_t(uint32_t((units + 0x1p23f) - 0x1p23f));
  }
  uint32_t h = (a >> 13) - (112u << 10);  // rebias the exponent, keep the top 10 mantissa bits
  const uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent (up to inf)
  return sign | uint16_t(h);
}

EMBER_PW_INLINE float bf16_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

// Round to nearest, ties to even; every NaN becomes the quiet NaN of its sign (as ml_dtypes).
EMBER_PW_INLINE uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t(((u >> 16) & 0x8000u) | 0x7fc0u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

template <typename T>
EMBER_PW_INLINE typename Compute<T>::type to_compute(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return half_to_float(v.bits);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return bf16_to_float(v.bits);
  } else {
    return v;
  }
}

// A computed value (or a converted one) as an element of type To.
template <typename To, typename V>
EMBER_PW_INLINE To convert(V v) {
  if constexpr (std::is_same_v<To, Half>) {
    return Half{float_to_half(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return BFloat16{float_to_bf16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != V(0);
  } else {
    return static_cast<To>(v);
  }
}

template <typename To, typename V>
EMBER_PW_INLINE To to_elem(V v) {
  return convert<To>(v);
}

// ---- operations ---------------------------------------------------------------------------
// Integers compute in unsigned types of at least 32 bits, where wrapping around is defined;
// bools as numpy's: add is or, mul is and.

template <typename C>
using Wide = std::conditional_t<(sizeof(C) < 4), uint32_t, std::make_unsigned_t<C>>;

template <typename C>
constexpr bool kIntegral = std::is_integral_v<C> && !std::is_same_v<C, bool>;

struct AddOp {
  template <typename C>
  EMBER_PW_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, bool>) return a || b;
    else if constexpr (kIntegral<C>) return C(Wide<C>(a) + Wide<C>(b));
    else return a + b;
  }
};

struct SubOp {
  template <typename C>
  EMBER_PW_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, bool>) return a != b;  // never asked for (PyTorch refuses it)
    else if constexpr (kIntegral<C>) return C(Wide<C>(a) - Wide<C>(b));
    else return a - b;
  }
};

struct MulOp {
  template <typename C>
  EMBER_PW_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, bool>) return a && b;
    else if constexpr (kIntegral<C>) return C(Wide<C>(a) * Wide<C>(b));
    else return a * b;
  }
};

// a + alpha * b (two roundings, as numpy's multiply then add)
template <typename C>
struct AddAlphaOp {
  C alpha;
  EMBER_PW_INLINE C operator()(C a, C b) const { return AddOp()(a, MulOp()(b, alpha)); }
};

template <typename C>
struct SubAlphaOp {
  C alpha;
  EMBER_PW_INLINE C operator()(C a, C b) const { return SubOp()(a, MulOp()(b, alpha)); }
};

struct DivOp {
  template <typename C>
  EMBER_PW_INLINE C operator()(C a, C b) const {
    return a / b;
  }
};

// numpy's maximum/minimum: a NaN operand wins (the first one if both are), and between equal
// values (0.0 and -0.0) the second operand is the result.
struct MaxOp {
  template <typename C>
  EMBER_PW_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return a != a ? a : (b != b ? b : (a > b ? a : b));
    else return a > b ? a : b;
  }
};

struct MinOp {
  template <typename C>
  EMBER_PW_INLINE C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) return a != a ? a : (b != b ? b : (a < b ? a : b));
    else return a < b ? a : b;
  }
};

// numpy's clip with both bounds: a NaN (value first, then low, then high) wins; a value equal to a
// bound stays itself (clip(-0.0, 0.0, 1.0) is -0.0); low above high gives high.
template <typename C, bool HasLo, bool HasHi>
EMBER_PW_INLINE C clamp_one(C v, C lo, C hi) {
  if constexpr (HasLo && HasHi) {
    if constexpr (std::is_floating_point_v<C>) {
      if (v != v) return v;
      if (lo != lo) return lo;
      if (hi != hi) return hi;
    }
    const C r = v < lo ? lo : v;
    return r > hi ? hi : r;
  } else if constexpr (HasLo) {
    return MaxOp()(v, lo);
  } else {
    return MinOp()(v, hi);
  }
}

#define EMBER_PW_COMPARISON(NAME, EXPR)               \
  struct NAME {                                       \
    template <typename C>                             \
    EMBER_PW_INLINE bool operator()(C a, C b) const { \
      return EXPR;                                    \
    }                                                 \
  };
EMBER_PW_COMPARISON(EqOp, a == b)
EMBER_PW_COMPARISON(NeOp, a != b)
EMBER_PW_COMPARISON(LtOp, a < b)
EMBER_PW_COMPARISON(LeOp, a <= b)
EMBER_PW_COMPARISON(GtOp, a > b)
EMBER_PW_COMPARISON(GeOp, a >= b)
#undef EMBER_PW_COMPARISON

struct Identity {
  template <typename C>
  EMBER_PW_INLINE C operator()(C a) const {
    return a;
  }
};

struct NegOp {
  template <typename C>
  EMBER_PW_INLINE C operator()(C a) const {
    if constexpr (std::is_same_v<C, bool>) return a;  // never asked for (PyTorch refuses it)
    else if constexpr (kIntegral<C>) return C(Wide<C>(0) - Wide<C>(a));
    else return -a;
  }
};

struct AbsOp {
  template <typename C>
  EMBER_PW_INLINE C operator()(C a) const {
    if constexpr (std::is_same_v<C, bool> || std::is_unsigned_v<C>) return a;
    else if constexpr (kIntegral<C>) return a < 0 ? C(Wide<C>(0) - Wide<C>(a)) : a;
    else return std::fabs(a);
  }
};

// relu as ember's kernel computes it: maximum(x, 0) (a NaN stays)
struct ReluOp {
  template <typename C>
  EMBER_PW_INLINE C operator()(C a) const {
    return MaxOp()(a, C(0));
  }
};

// ---- transcendental functions ---------------------------------------------------------------
// exp, log, tanh and sigmoid of float32 (float16 and bfloat16 too: they compute in float32) are
// written out below as straight-line code, which GCC vectorises (with -fno-trapping-math, see
// CMakeLists.txt: otherwise it keeps the selects as branches); float64 calls the C library per
// element, as numpy does on CPUs without AVX-512. Accuracy against the correctly rounded result,
// measured on 4M random bit patterns and 2M normals (tests/test_cpu_pointwise_math.py): exp and log
// within 1 ulp, tanh within 1 (computed in float64), sigmoid within 2. numpy's own float32 loops
// are off by up to 2 (exp) and 3 (log) ulp, so the two differ by up to 3 and 4 ulp at worst.

EMBER_PW_INLINE uint64_t double_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof(u));
  return u;
}

EMBER_PW_INLINE double bits_double(uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof(d));
  return d;
}

// e**x in float32 arithmetic. x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts: n * 0.693359375
// is exact for the n that occur), e**r by its Taylor polynomial to degree 7 (truncation error below
// 0.1 ulp), and the scaling by 2**n in two steps so that subnormal results are rounded only once.
// Arguments are clamped where the result is already 0 or inf; NaN is passed through.
EMBER_PW_INLINE float exp_float(float x) {
  const float xc = x < -104.0f ? -104.0f : (x > 88.8f ? 88.8f : x);
  const float shifter = 0x1.8p23f;  // adding it rounds to an integer, kept in the low mantissa bits
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
  const int32_t ni = int32_t(float_bits(k) - float_bits(shifter));
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float result = (p * bits_float(uint32_t(n1 + 127) << 23)) * bits_float(uint32_t(n2 + 127) << 23);
  return x != x ? x : result;
}

// log(x) in float32 arithmetic: x = 2**e m with m in [sqrt(1/2), sqrt(2)) (subnormals scaled up
// first), and with f = m - 1 (exact) and s = f / (2 + f), log(m) = 2 atanh(s) = f - s (f - R(s^2))
// where R(z) = 2z/3 + 2z^2/5 + ... (the series to z^5: truncation error ~1e-10), evaluated as
// f - (f^2/2 - s (f^2/2 + R)) to keep the small terms apart. e ln2 is added in two parts.
EMBER_PW_INLINE float log_float(float x) {
  const bool subnormal = x < 0x1p-126f;
  const uint32_t u = float_bits(subnormal ? x * 0x1p23f : x);
  const uint32_t v = u + (0x3f800000u - 0x3f3504f3u);  // the exponent of x / sqrt(1/2)
  const int32_t e = int32_t(v >> 23) - 127 - (subnormal ? 23 : 0);
  const float f = bits_float((v & 0x7fffffu) + 0x3f3504f3u) - 1.0f;
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
  const float ef = float(e);
  const float result = (ef * -2.12194440e-4f + log_m) + ef * 0.693359375f;
  const float special = x == 0.0f ? -INFINITY : (x == INFINITY ? INFINITY : result);
  return x < 0.0f ? NAN : (x != x ? x : special);
}

// e**x in float64 for |x| <= 40 (tanh below): as exp_float, with the polynomial to degree 10 (error
// ~1e-13, ample for a float32 result).
EMBER_PW_INLINE double exp_wide(double x) {
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
  return p * bits_double((double_bits(k) - double_bits(shifter) + 1023) << 52);
}

// tanh of a float32, computed in float64 and rounded once: 1 - 2 / (e**2|x| + 1) with x's sign, and
// its Taylor polynomial x - x^3/3 + 2x^5/15 below 2**-8, where the subtraction would cancel.
EMBER_PW_INLINE float tanh_float(float xf) {
  const double x = xf;
  const double a = x < 0 ? -x : x;
  const double e = exp_wide(a < 20.0 ? 2.0 * a : 40.0);  // tanh(20) rounds to 1
  const double big = 1.0 - 2.0 / (e + 1.0);
  const double z = x * x;
  const double small = x * (1.0 + z * (-1.0 / 3 + z * (2.0 / 15)));  // (-0.0 stays -0.0)
  const double result = a < 0x1p-8 ? small : (x < 0 ? -big : big);
  return xf != xf ? xf : float(result);
}

// ember's sigmoid of a float32, 1 / (1 + e**t) with t = -x, as its numpy path computes it: in float32
// (so 0 from t = 88.7228394, where e**t overflows float32). e**t as in exp_float, with three changes
// for speed (the loop is bound by the latency of its dependent operations more than by their number):
// t is clamped below at -30, where 1 + e**t already rounds to 1, so that e**t is never subnormal and
// 2**n is one multiplication; the result is 0.5 / (0.5 + e**t / 2), the same quotient rounded the same
// way, with 2**(n - 1) built from k's bits (k holds n in its low bits, and 0x4b400000 << 23 wraps to
// 0), so that n = 128 near the top of the range still fits; and the polynomial is evaluated in
// Estrin's scheme, in pairs of terms (its depth halves). Within 2 ulp of the correctly rounded value
// (tests/test_cpu_pointwise_math.py); no fused multiply-adds, so both instruction sets give the same
// bits. 1M float32 on one thread: 1.13 -> 0.76 ms.
EMBER_PW_INLINE float sigmoid_float(float x) {
  const float t = -x;
  const float tc = t < -30.0f ? -30.0f : (t > 88.75f ? 88.75f : t);
  const float shifter = 0x1.8p23f;
  const float k = tc * 0x1.715476p0f + shifter;
  const float n = k - shifter;
  const float r = (tc - n * 0.693359375f) - n * -2.12194440e-4f;
  // e**r = 1 + r + r^2 (1/2 + r/6 + r^2/24 + r^3/120 + r^4/720 + r^5/5040)
  const float r2 = r * r;
  const float a = 0.5f + r * (1.0f / 6);
  const float b = 1.0f / 24 + r * (1.0f / 120);
  const float c = 1.0f / 720 + r * (1.0f / 5040);
  const float p = (r2 * ((a + r2 * b) + (r2 * r2) * c) + r) + 1.0f;
  const float half_e = p * bits_float((float_bits(k) << 23) + (126u << 23));  // p 2**(n - 1)
  const float s = 0.5f / (0.5f + half_e);
  return t >= 88.72283935546875f ? 0.0f : s;  // (a NaN stays NaN: it fails the test and passes the arithmetic)
}

// ember's sigmoid, 1 / (1 + e**-x), in the input's type (float32: sigmoid_float above).
template <typename C>
EMBER_PW_INLINE C sigmoid_of(C x) {
  if constexpr (std::is_same_v<C, float>) return sigmoid_float(x);
  else return 1.0 / (1.0 + std::exp(-x));
}

#define EMBER_PW_FLOAT_FUNCTION(NAME, FLOAT_EXPR, DOUBLE_EXPR)                               \
  struct NAME {                                                                              \
    template <typename C>                                                                    \
    EMBER_PW_INLINE C operator()(C a) const {                                                \
      static_assert(std::is_floating_point_v<C>, #NAME " is for floating types");            \
      if constexpr (std::is_same_v<C, float>) return FLOAT_EXPR;                             \
      else return DOUBLE_EXPR;                                                               \
    }                                                                                        \
  };
EMBER_PW_FLOAT_FUNCTION(ExpOp, exp_float(a), std::exp(a))
EMBER_PW_FLOAT_FUNCTION(LogOp, log_float(a), std::log(a))
EMBER_PW_FLOAT_FUNCTION(TanhOp, tanh_float(a), std::tanh(a))
EMBER_PW_FLOAT_FUNCTION(SigmoidOp, sigmoid_of(a), sigmoid_of(a))
// sqrt is exact (IEEE), and rsqrt is numpy's reciprocal of it (two roundings)
EMBER_PW_FLOAT_FUNCTION(SqrtOp, std::sqrt(a), std::sqrt(a))
EMBER_PW_FLOAT_FUNCTION(RsqrtOp, 1.0f / std::sqrt(a), 1.0 / std::sqrt(a))
#undef EMBER_PW_FLOAT_FUNCTION

enum BinaryOp { kAdd = 0, kSub, kMul, kDiv, kMaximum, kMinimum, kEq, kNe, kLt, kLe, kGt, kGe };
enum UnaryOp { kNeg = 0, kAbs, kRelu, kExp, kLog, kTanh, kSigmoid, kSqrt, kRsqrt };

// ---- the loop -----------------------------------------------------------------------------

// Operand 0 is the output; strides are in bytes.
struct Loop {
  int ndim = 0;
  int nops = 0;
  int64_t shape[kMaxDims];
  int64_t strides[kMaxOperands][kMaxDims];
  char* data[kMaxOperands];

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }
};

// Whether dim i should come before (outside) dim j: the output's larger stride goes outside;
// on a tie the first input whose strides differ decides.
bool outer_before(const Loop& L, int i, int j) {
  for (int k = 0; k < L.nops; ++k) {
    const int64_t si = std::abs(L.strides[k][i]), sj = std::abs(L.strides[k][j]);
    if (si == 0 || sj == 0 || si == sj) continue;
    return si > sj;
  }
  return i < j;
}

// The loop of `out = f(inputs...)`: inputs broadcast to out's shape. An input may be None (a
// missing clamp bound: never read).
Loop make_loop(const char* name, py::array& out, const std::vector<py::object>& inputs) {
  Loop L;
  const int nd = static_cast<int>(out.ndim());
  L.nops = 1 + static_cast<int>(inputs.size());
  if (L.nops > kMaxOperands) throw std::invalid_argument(std::string(name) + ": too many operands");
  L.data[0] = static_cast<char*>(out.mutable_data());
  std::vector<int64_t> shape(out.shape(), out.shape() + nd);
  std::vector<std::vector<int64_t>> strides(L.nops, std::vector<int64_t>(nd, 0));
  for (int d = 0; d < nd; ++d) strides[0][d] = out.strides(d);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].is_none()) {
      L.data[k + 1] = nullptr;
      continue;
    }
    if (!py::isinstance<py::array>(inputs[k]))
      throw py::type_error(std::string(name) + ": inputs must be numpy arrays or None");
    py::array a = py::reinterpret_borrow<py::array>(inputs[k]);
    const int ad = static_cast<int>(a.ndim());
    if (ad > nd) throw std::invalid_argument(std::string(name) + ": an input has more dims than the output");
    L.data[k + 1] = const_cast<char*>(static_cast<const char*>(a.data()));
    for (int d = 0; d < ad; ++d) {
      const int od = d + nd - ad;
      if (a.shape(d) == shape[od]) {
        strides[k + 1][od] = a.strides(d);
      } else if (a.shape(d) != 1) {
        throw std::invalid_argument(std::string(name) + ": an input of size " + std::to_string(a.shape(d)) +
                                    " does not broadcast to the output's size " + std::to_string(shape[od]));
      }
    }
  }
  // drop dims of size 1 (keeping one dim for a zero-dim loop)
  std::vector<int> dims;
  for (int d = 0; d < nd; ++d)
    if (shape[d] != 1) dims.push_back(d);
  L.ndim = static_cast<int>(dims.size());
  for (int i = 0; i < L.ndim; ++i) {
    L.shape[i] = shape[dims[i]];
    for (int k = 0; k < L.nops; ++k) L.strides[k][i] = strides[k][dims[i]];
  }
  if (L.ndim == 0) {
    L.ndim = 1;
    L.shape[0] = 1;
    for (int k = 0; k < L.nops; ++k) L.strides[k][0] = 0;
    return L;
  }
  // order the dims: insertion sort, so equal dims keep their order
  for (int i = 1; i < L.ndim; ++i) {
    for (int j = i; j > 0 && outer_before(L, j, j - 1); --j) {
      std::swap(L.shape[j], L.shape[j - 1]);
      for (int k = 0; k < L.nops; ++k) std::swap(L.strides[k][j], L.strides[k][j - 1]);
    }
  }
  // merge dim i into dim i + 1 where every operand steps through the two as through one
  int kept = 0;
  for (int i = 1; i < L.ndim; ++i) {
    bool mergeable = true;
    for (int k = 0; k < L.nops && mergeable; ++k)
      mergeable = L.strides[k][kept] == L.strides[k][i] * L.shape[i];
    if (mergeable) {
      L.shape[kept] *= L.shape[i];
      for (int k = 0; k < L.nops; ++k) L.strides[k][kept] = L.strides[k][i];
    } else {
      ++kept;
      L.shape[kept] = L.shape[i];
      for (int k = 0; k < L.nops; ++k) L.strides[k][kept] = L.strides[k][i];
    }
  }
  L.ndim = kept + 1;
  return L;
}

}  // namespace

// ---- the loops, compiled per instruction set ---------------------------------------------------

#if defined(__x86_64__) || defined(__i386__)
namespace pw_avx2 {
namespace {
#pragma GCC push_options
#pragma GCC target("avx2")
#include "pointwise_loops.h"
#pragma GCC pop_options
}  // namespace
}  // namespace pw_avx2
#endif

namespace pw_baseline {
namespace {
#include "pointwise_loops.h"
}  // namespace
}  // namespace pw_baseline

namespace {

struct Kernels {
  void (*binary)(int, int, const Loop&, double, int64_t, bool);
  void (*unary)(int, int, const Loop&);
  void (*convert)(int, int, const Loop&);
  void (*where)(int, const Loop&);
  void (*clamp)(int, bool, bool, const Loop&);
};

enum Isa { kAvx2 = 0, kBaseline = 1 };
constexpr const char* kIsaNames[] = {"avx2", "baseline"};

bool isa_supported(int isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (isa == kAvx2) return __builtin_cpu_supports("avx2");
#endif
  return isa == kBaseline;
}

int g_isa = isa_supported(kAvx2) ? kAvx2 : kBaseline;

const Kernels& kernels() {
  static const Kernels tables[] = {
#if defined(__x86_64__) || defined(__i386__)
      {&pw_avx2::binary, &pw_avx2::unary, &pw_avx2::convert, &pw_avx2::where, &pw_avx2::clamp},
#else
      {&pw_baseline::binary, &pw_baseline::unary, &pw_baseline::convert, &pw_baseline::where, &pw_baseline::clamp},
#endif
      {&pw_baseline::binary, &pw_baseline::unary, &pw_baseline::convert, &pw_baseline::where, &pw_baseline::clamp},
  };
  return tables[g_isa];
}

std::string set_pointwise_isa(const std::string& name) {
  const std::string previous = kIsaNames[g_isa];
  for (int isa = kAvx2; isa <= kBaseline; ++isa) {
    if (name == kIsaNames[isa]) {
      if (!isa_supported(isa)) throw std::invalid_argument("set_pointwise_isa: this CPU lacks " + name);
      g_isa = isa;
      return previous;
    }
  }
  throw std::invalid_argument("set_pointwise_isa: unknown instruction set '" + name + "' (expected avx2 or baseline)");
}

void pointwise_binary(int op, int code, py::array out, py::object a, py::object b, double alpha_f, int64_t alpha_i,
                      bool has_alpha) {
  const Loop L = make_loop("pointwise_binary", out, {a, b});
  py::gil_scoped_release release;
  kernels().binary(op, code, L, alpha_f, alpha_i, has_alpha);
}

void pointwise_unary(int op, int code, py::array out, py::object a) {
  const Loop L = make_loop("pointwise_unary", out, {a});
  py::gil_scoped_release release;
  kernels().unary(op, code, L);
}

void pointwise_convert(int to, int from, py::array out, py::object a) {
  const Loop L = make_loop("pointwise_convert", out, {a});
  py::gil_scoped_release release;
  kernels().convert(to, from, L);
}

void pointwise_where(py::array out, py::object cond, py::object a, py::object b) {
  const int itemsize = static_cast<int>(out.itemsize());
  const Loop L = make_loop("pointwise_where", out, {cond, a, b});
  py::gil_scoped_release release;
  kernels().where(itemsize, L);
}

void pointwise_clamp(int code, py::array out, py::object a, py::object lo, py::object hi) {
  const Loop L = make_loop("pointwise_clamp", out, {a, lo, hi});
  py::gil_scoped_release release;
  kernels().clamp(code, !lo.is_none(), !hi.is_none(), L);
}

// The loop's canonical form, for tests: (shape, strides of each operand in bytes).
py::tuple pointwise_loop_shape(py::array out, std::vector<py::object> inputs) {
  const Loop L = make_loop("pointwise_loop_shape", out, inputs);
  py::list shape, strides;
  for (int d = 0; d < L.ndim; ++d) shape.append(L.shape[d]);
  for (int k = 0; k < L.nops; ++k) {
    py::list s;
    for (int d = 0; d < L.ndim; ++d) s.append(L.strides[k][d]);
    strides.append(py::tuple(s));
  }
  return py::make_tuple(py::tuple(shape), py::tuple(strides));
}

}  // namespace

void init_pointwise(py::module_& m) {
  // Arguments are numpy arrays checked by _cpu_pointwise.py (dtype codes, dtypes, overlap); the
  // functions here check what protects memory (broadcasting to the output, writable output).
  m.def("pointwise_binary", &pointwise_binary, py::arg("op"), py::arg("dtype"), py::arg("out"), py::arg("a"),
        py::arg("b"), py::arg("alpha_f") = 1.0, py::arg("alpha_i") = 1, py::arg("has_alpha") = false,
        "out = op(a, b) over arrays of one dtype (code), broadcast to out; out is that dtype or bool.");
  m.def("pointwise_unary", &pointwise_unary, py::arg("op"), py::arg("dtype"), py::arg("out"), py::arg("a"),
        "out = op(a) (neg, abs, relu; exp, log, tanh, sigmoid, sqrt, rsqrt of floating types), broadcast to out.");
  m.def("pointwise_convert", &pointwise_convert, py::arg("to"), py::arg("from_"), py::arg("out"), py::arg("a"),
        "out = a converted from dtype code from_ to dtype code to, broadcast to out.");
  m.def("pointwise_where", &pointwise_where, py::arg("out"), py::arg("condition"), py::arg("a"), py::arg("b"),
        "out = where(condition, a, b); condition is bool, a and b have out's dtype.");
  m.def("pointwise_clamp", &pointwise_clamp, py::arg("dtype"), py::arg("out"), py::arg("a"), py::arg("low"),
        py::arg("high"), "out = clamp(a, low, high) as numpy's clip (or maximum/minimum with one bound).");
  m.def("pointwise_loop_shape", &pointwise_loop_shape, py::arg("out"), py::arg("inputs"),
        "The collapsed loop of out and inputs: (shape, per-operand byte strides); for tests.");
  m.def("set_pointwise_isa", &set_pointwise_isa, py::arg("name"),
        "Select the pointwise kernels' instruction set ('avx2', 'baseline'); returns the previous one. For tests.");
  m.def("pointwise_isa", []() { return std::string(kIsaNames[g_isa]); }, "The pointwise kernels' instruction set.");
}
