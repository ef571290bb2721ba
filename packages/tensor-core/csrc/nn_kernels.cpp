// ember._C kernels for the fused nn ops: softmax/log_softmax, layer_norm, gelu and
// cross_entropy and embedding's row lookup (ember/_ops/nn_activation.py (and the other nn_* modules)), and
// gather/scatter_add along a dim (ember/_ops/gather_scatter.py).
//
// Layout: every kernel takes C-contiguous float32/float64 arrays (the Python side
// makes a contiguous copy, or computes float16/bfloat16 in float32, before calling)
// and sees them as [outer, n, inner] around the dim it works along; inner == 1 is
// the common "last dim" case, where rows are contiguous.
//
// Math: exp is computed by Cody-Waite range reduction, x = n*ln2 + r with
// |r| <= ln2/2, then exp(r) by its Taylor polynomial (degree 7 for float32, whose
// truncation error r^8/8! < 6e-9 is under 0.1 ulp; degree 12 for float64,
// r^13/13! < 2e-16) and 2^n built from exponent bits in two halves so that
// results in the subnormal range and overflow to inf come out right.
// exact gelu computes Phi(-|x|) as t * exp(P(t) - x^2/2), which keeps its relative
// accuracy in the negative tail (up to about x^2/2 ulp, from rounding x^2/2):
// float32 by the Chebyshev fit of erfc of Press et al., "Numerical Recipes" (3rd
// ed., section 6.2.2), fractional error below 1.2e-7 for every argument; float64
// by our own degree-23 fit (see kPhiTailCoeffs). gelu with approximate='tanh' uses
// 0.5 * (1 + tanh(u)) = 1 / (1 + exp(-2u)), which has no cancellation for u << 0.
// Sums (softmax denominators, layer_norm moments) accumulate blocks of a row in
// many vector lanes of the input's type and add each block's total to a float64
// accumulator, so the rounding error grows with the block, not the row, length.
// NaN and inf propagate as in PyTorch: a row holding NaN or +inf, or only -inf,
// gives NaN throughout (softmax, log_softmax, layer_norm, cross_entropy).
//
// Speed: the row kernels use GCC vector extensions of 64 bytes and are compiled
// for AVX-512, AVX2+FMA and the x86-64 baseline; the best one that the CPU
// supports is picked once, at import (set_nn_isa changes it, for tests). A row
// ends with one vector that overlaps the previous one (masked in sums) instead of
// a scalar loop, and horizontal sums/maxima use constant lane rotations, so short
// rows (cross_entropy over 100 classes) stay cheap. gelu works on packs of 8
// vectors so that their long dependency chains overlap. OpenMP splits independent
// rows (or column blocks, or element ranges) over the threads once there are
// kParallelWork elements of work. gather/scatter_add are memory-bound scalar
// loops; scatter_add into a small output adds into per-thread private copies. embedding
// copies whole table rows with memcpy, split over the threads for large outputs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef EMBER_HAS_OPENMP
#include <omp.h>
#endif

#if !defined(__GNUC__)
#error "nn_kernels.cpp needs GCC or Clang (vector extensions and target attributes)"
#endif

namespace py = pybind11;

// The 64-byte vectors only live inside always-inline functions (see reduce.cpp).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

// Elements of work below which a kernel stays on one thread: a parallel region costs more.
constexpr int64_t kParallelWork = 1 << 15;
// Columns that the softmax over a middle dim handles together.
constexpr int64_t kColumns = 256;

int max_threads() {
#ifdef EMBER_HAS_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int thread_id() {
#ifdef EMBER_HAS_OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

int team_size() {
#ifdef EMBER_HAS_OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

#define NN_INLINE inline __attribute__((always_inline))
#define NN_INLINE_LAMBDA __attribute__((always_inline))

// ---- vectors ---------------------------------------------------------------------------------

// B bytes of T: 64 fill one AVX-512 register (GCC splits the vector into two or four registers for
// AVX2 and the baseline).
template <typename T, int B = 64>
struct Simd {
  using Int = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef T V __attribute__((vector_size(B)));
  typedef Int I __attribute__((vector_size(B)));
};

template <typename T, int B = 64>
using Vec = typename Simd<T, B>::V;
template <typename T, int B = 64>
using IVec = typename Simd<T, B>::I;
template <typename T, int B = 64>
constexpr int64_t kLanes = B / sizeof(T);

template <typename T, int B = 64>
NN_INLINE Vec<T, B> splat(T a) {
  return Vec<T, B>{} + a;
}

template <typename T, int B = 64>
NN_INLINE Vec<T, B> load(const T* p) {
  Vec<T, B> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T, int B = 64>
NN_INLINE void store(T* p, const Vec<T, B>& v) {
  std::memcpy(p, &v, sizeof v);
}

// The k (< kLanes) elements at p, the other lanes set to fill.
template <typename T, int B = 64>
NN_INLINE Vec<T, B> load_part(const T* p, int64_t k, T fill) {
  alignas(64) T buf[kLanes<T, B>];
  for (int64_t i = 0; i < kLanes<T, B>; ++i) buf[i] = i < k ? p[i] : fill;
  return load<T, B>(buf);
}

template <typename T, int B = 64>
NN_INLINE void store_part(T* p, const Vec<T, B>& v, int64_t k) {
  alignas(64) T buf[kLanes<T, B>];
  store<T, B>(buf, v);
  std::memcpy(p, buf, k * sizeof(T));
}

// ---- packs ---------------------------------------------------------------------------------------
// N vectors whose operations are emitted for each vector in turn. An elementwise kernel with a long
// dependency chain per vector (division, polynomial, exp) keeps the CPU waiting on one vector; with a
// pack, N independent chains are in flight. (GCC lowers comparisons of vectors wider than the
// hardware's one lane at a time, so a plain 128- or 256-byte vector type is no substitute.)
template <typename V, int N>
struct Pack {
  V v[N];
};

#define EMBER_NN_PACK_OP(OP)                                                                   \
  template <typename V, int N>                                                                 \
  NN_INLINE Pack<V, N> operator OP(const Pack<V, N>& a, const Pack<V, N>& b) {                 \
    Pack<V, N> r;                                                                              \
    for (int k = 0; k < N; ++k) r.v[k] = a.v[k] OP b.v[k];                                    \
    return r;                                                                                  \
  }                                                                                            \
  template <typename V, int N, typename S, typename = std::enable_if_t<std::is_arithmetic_v<S>>> \
  NN_INLINE Pack<V, N> operator OP(const Pack<V, N>& a, S b) {                                 \
    Pack<V, N> r;                                                                              \
    for (int k = 0; k < N; ++k) r.v[k] = a.v[k] OP b;                                         \
    return r;                                                                                  \
  }                                                                                            \
  template <typename V, int N, typename S, typename = std::enable_if_t<std::is_arithmetic_v<S>>> \
  NN_INLINE Pack<V, N> operator OP(S a, const Pack<V, N>& b) {                                 \
    Pack<V, N> r;                                                                              \
    for (int k = 0; k < N; ++k) r.v[k] = a OP b.v[k];                                         \
    return r;                                                                                  \
  }
EMBER_NN_PACK_OP(+)
EMBER_NN_PACK_OP(-)
EMBER_NN_PACK_OP(*)
EMBER_NN_PACK_OP(/)
EMBER_NN_PACK_OP(&)
EMBER_NN_PACK_OP(<<)
EMBER_NN_PACK_OP(>>)
#undef EMBER_NN_PACK_OP

// The integer vector type of a vector (or pack) type: what its comparisons return.
template <typename V>
struct IntOf {
  using type = decltype(V{} < V{});
};
template <typename V, int N>
struct IntOf<Pack<V, N>> {
  using type = Pack<typename IntOf<V>::type, N>;
};
template <typename V>
using IntOfT = typename IntOf<V>::type;

// GCC 12 lowers a comparison, or a select on its mask, of generic vectors wider than the target's
// registers to one lane at a time: under AVX2 a 64-byte compare was 16 scalar ones (softmax of
// 1024x1024 float32 took 4x PyTorch's time). On 64-byte vectors less and select therefore work on
// two 32-byte halves, which AVX2 compares in one instruction each (AVX-512 pays one extra op).
template <typename V>
struct HalfOf {
  using E = std::remove_cv_t<std::remove_reference_t<decltype(V{}[0])>>;
  typedef E type __attribute__((vector_size(sizeof(V) / 2)));
};

template <typename V>
NN_INLINE void split_halves(const V& v, typename HalfOf<V>::type& lo, typename HalfOf<V>::type& hi) {
  std::memcpy(&lo, &v, sizeof lo);
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
}

template <typename V, typename H>
NN_INLINE V join_halves(const H& lo, const H& hi) {
  V v;
  std::memcpy(&v, &lo, sizeof lo);
  std::memcpy(reinterpret_cast<char*>(&v) + sizeof lo, &hi, sizeof hi);
  return v;
}

template <typename V>
NN_INLINE IntOfT<V> less(const V& a, const V& b) {
  if constexpr (sizeof(V) == 64) {
    typename HalfOf<V>::type a0, a1, b0, b1;
    split_halves(a, a0, a1);
    split_halves(b, b0, b1);
    return join_halves<IntOfT<V>>(a0 < b0, a1 < b1);
  } else {
    return a < b;
  }
}
template <typename V, int N>
NN_INLINE IntOfT<Pack<V, N>> less(const Pack<V, N>& a, const Pack<V, N>& b) {
  IntOfT<Pack<V, N>> r;
  for (int k = 0; k < N; ++k) r.v[k] = less(a.v[k], b.v[k]);
  return r;
}

// m ? a : b, lane by lane (m: all bits set or clear)
template <typename M, typename V>
NN_INLINE V select(const M& m, const V& a, const V& b) {
  if constexpr (sizeof(V) == 64 && sizeof(M) == 64) {
    typename HalfOf<M>::type m0, m1;
    typename HalfOf<V>::type a0, a1, b0, b1;
    split_halves(m, m0, m1);
    split_halves(a, a0, a1);
    split_halves(b, b0, b1);
    return join_halves<V>(m0 ? a0 : b0, m1 ? a1 : b1);
  } else {
    return m ? a : b;
  }
}
template <typename M, typename V, int N>
NN_INLINE Pack<V, N> select(const Pack<M, N>& m, const Pack<V, N>& a, const Pack<V, N>& b) {
  Pack<V, N> r;
  for (int k = 0; k < N; ++k) r.v[k] = select(m.v[k], a.v[k], b.v[k]);
  return r;
}

template <typename To, typename From>
NN_INLINE To bitcast(const From& f) {
  static_assert(sizeof(To) == sizeof(From), "bitcast between types of different sizes");
  To t;
  std::memcpy(&t, &f, sizeof t);
  return t;
}

template <typename V, typename S>
NN_INLINE V broadcast(S s) {
  return V{} + s;
}

template <typename V, typename T>
NN_INLINE V load_as(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename V, typename T>
NN_INLINE void store_as(T* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

template <typename T>
NN_INLINE Vec<T> vmax(const Vec<T>& a, const Vec<T>& b) {
  return select(less(b, a), a, b);  // a > b ? a : b
}

template <typename T, typename V>
NN_INLINE V vabs(const V& a) {
  using I = IntOfT<V>;
  constexpr auto magnitude = std::numeric_limits<typename Simd<T>::Int>::max();
  return bitcast<V>(bitcast<I>(a) & magnitude);
}

// v with its lanes rotated by W: lane i holds v[(i + W) % kLanes] (a constant permutation).
template <typename T, int64_t W, size_t... I>
NN_INLINE Vec<T> rotate_lanes(const Vec<T>& v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, ((I + W) % kLanes<T>)...);
}

template <typename T, int64_t W>
NN_INLINE Vec<T> rotate(const Vec<T>& v) {
  return rotate_lanes<T, W>(v, std::make_index_sequence<kLanes<T>>{});
}

// 0, 1, 2, ... in the lanes of the integer vector type of Vec<T>.
template <typename T, size_t... I>
NN_INLINE IVec<T> lane_numbers(std::index_sequence<I...>) {
  return IVec<T>{static_cast<typename Simd<T>::Int>(I)...};
}

// The sum of the lanes (a tree of rotations), in double.
template <typename T>
NN_INLINE double hsum(Vec<T> v) {
  if constexpr (kLanes<T> >= 16) v += rotate<T, 8>(v);
  v += rotate<T, 4>(v);
  v += rotate<T, 2>(v);
  v += rotate<T, 1>(v);
  return v[0];
}

template <typename T>
NN_INLINE T hmax(Vec<T> v) {
  if constexpr (kLanes<T> >= 16) v = vmax<T>(v, rotate<T, 8>(v));
  v = vmax<T>(v, rotate<T, 4>(v));
  v = vmax<T>(v, rotate<T, 2>(v));
  v = vmax<T>(v, rotate<T, 1>(v));
  return v[0];
}

// Rows of n >= kLanes elements end with one vector loaded at n - kLanes, overlapping the previous one;
// tail_lanes(rem) marks its last rem lanes, the elements not seen before. Recomputed overlapping
// elements get the bits they already had, so storing them again is harmless; sums mask them out.
template <typename T>
NN_INLINE IVec<T> tail_lanes(int64_t rem) {
  // lane >= kLanes - rem, as kLanes - rem - 1 < lane (less: see HalfOf)
  return less(IVec<T>{} + static_cast<typename Simd<T>::Int>(kLanes<T> - rem - 1),
              lane_numbers<T>(std::make_index_sequence<kLanes<T>>{}));
}

// ---- exp ---------------------------------------------------------------------------------------

template <typename T>
struct ExpConst;

template <>
struct ExpConst<float> {
  static constexpr float lo = -104.0f;         // exp(lo) rounds to 0
  static constexpr float lo_normal = -88.0f;   // rounds to n = -127: the scale 2^n is built as +0
  static constexpr float hi = 89.0f;    // exp(hi) overflows to inf
  static constexpr float log2e = 1.44269504088896341f;
  static constexpr float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  static constexpr float ln2_hi = 0.693359375f;      // Cody-Waite split of ln 2
  static constexpr float ln2_lo = -2.12194440e-4f;
  static constexpr int degree = 7;
  static constexpr int mantissa_bits = 23;
  static constexpr int bias = 127;
};

template <>
struct ExpConst<double> {
  static constexpr double lo = -746.0;
  static constexpr double lo_normal = -709.0;  // n = -1023
  static constexpr double hi = 710.0;
  static constexpr double log2e = 1.4426950408889634;
  static constexpr double round_magic = 6755399441055744.0;  // 1.5 * 2^52
  static constexpr double ln2_hi = 6.93147180369123816490e-01;
  static constexpr double ln2_lo = 1.90821492927058770002e-10;
  static constexpr int degree = 12;
  static constexpr int mantissa_bits = 52;
  static constexpr int bias = 1023;
};

// exp of the lanes of V (a vector or a pack of T). Callers whose arguments never exceed 0 (apart from
// NaN, which propagates either way) pass Positive = false and skip the overflow clamp; Subnormal = false
// flushes results below the smallest normal number (about 1e-38 in float32) to 0, which saves the
// two-step scaling.
template <typename T, bool Positive = true, bool Subnormal = true, typename V>
NN_INLINE V vexp(V x) {
  using C = ExpConst<T>;
  using I = IntOfT<V>;
  // clamping keeps NaN (the comparisons are false for it) and makes n fit the exponent range
  const V lo = broadcast<V>(Subnormal ? C::lo : C::lo_normal);
  x = select(less(x, lo), lo, x);
  if constexpr (Positive) {
    const V hi = broadcast<V>(C::hi);
    x = select(less(hi, x), hi, x);
  }
  const V k = x * C::log2e + C::round_magic;
  const V nf = k - C::round_magic;
  const I n = bitcast<I>(k) - bitcast<I>(broadcast<V>(C::round_magic));
  V r = x - nf * C::ln2_hi;
  r = r - nf * C::ln2_lo;
  // Taylor polynomial of exp(r), Horner form; coefficients 1/j!
  double inv_fact = 1.0;
  for (int j = 2; j <= C::degree; ++j) inv_fact /= j;
  V p = broadcast<V>(static_cast<T>(inv_fact));
  for (int j = C::degree; j >= 1; --j) {
    inv_fact *= j;
    p = p * r + static_cast<T>(inv_fact);
  }
  if constexpr (Subnormal) {
    // 2^n = 2^n1 * 2^n2, each factor a normal number even when 2^n is not
    const I n1 = n >> 1;
    const I n2 = n - n1;
    return p * bitcast<V>((n1 + C::bias) << C::mantissa_bits) * bitcast<V>((n2 + C::bias) << C::mantissa_bits);
  } else {
    // n >= -bias, and n == -bias gives the scale +0
    return p * bitcast<V>((n + C::bias) << C::mantissa_bits);
  }
}

// ---- softmax -------------------------------------------------------------------------------------

// Elements per block of a row sum: each lane adds up kBlock / kLanes terms in T.
constexpr int64_t kBlock = 512;

template <typename T>
NN_INLINE T row_max(const T* x, int64_t n) {
  constexpr int64_t L = kLanes<T>;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  Vec<T> m0 = splat<T>(neg_inf), m1 = m0;
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    m0 = vmax<T>(m0, load(x + i));
    m1 = vmax<T>(m1, load(x + i + L));
  }
  for (; i + L <= n; i += L) m0 = vmax<T>(m0, load(x + i));
  if (i < n) m0 = vmax<T>(m0, n >= L ? load(x + n - L) : load_part(x + i, n - i, neg_inf));
  return hmax<T>(vmax<T>(m0, m1));
}

// sum(exp(x - m)) over a row; stores the exponentials in y unless y is null.
// Padding lanes read -inf, whose exponential is 0 whenever the row's result is not NaN anyway.
template <typename T>
NN_INLINE double row_exp_sum(const T* x, T* y, int64_t n, T m) {
  constexpr int64_t L = kLanes<T>;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const Vec<T> mv = splat<T>(m);
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t end = std::min(n, b + kBlock);
    Vec<T> acc = Vec<T>{};
    int64_t i = b;
    for (; i + L <= end; i += L) {
      const Vec<T> e = vexp<T, false>(load(x + i) - mv);
      if (y) store(y + i, e);
      acc += e;
    }
    if (i < end && n >= L) {
      const Vec<T> e = vexp<T, false>(load(x + n - L) - mv);
      if (y) store(y + n - L, e);
      acc += select(tail_lanes<T>(end - i), e, Vec<T>{});
    } else if (i < end) {
      const Vec<T> e = vexp<T, false>(load_part(x + i, end - i, neg_inf) - mv);
      if (y) store_part(y + i, e, end - i);
      acc += e;
    }
    total += hsum<T>(acc);
  }
  return total;
}

template <typename T>
NN_INLINE void scale_row(T* y, int64_t n, T s) {
  constexpr int64_t L = kLanes<T>;
  int64_t i = 0;
  for (; i + L <= n; i += L) store(y + i, load(y + i) * s);
  if (i < n && n >= L) {
    const Vec<T> v = load(y + n - L);
    store(y + n - L, select(tail_lanes<T>(n - i), v * s, v));
  } else {
    for (; i < n; ++i) y[i] *= s;
  }
}

template <typename T>
NN_INLINE void shift_row(const T* x, T* y, int64_t n, T s) {
  constexpr int64_t L = kLanes<T>;
  int64_t i = 0;
  for (; i + L <= n; i += L) store(y + i, load(x + i) - s);
  if (i < n && n >= L) {
    store(y + n - L, load(x + n - L) - s);
  } else {
    for (; i < n; ++i) y[i] = x[i] - s;
  }
}

template <typename T>
NN_INLINE void softmax_rows(const T* x, T* y, int64_t n, int64_t r0, int64_t r1, bool log) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    const T m = row_max<T>(xr, n);
    if (log) {
      const double total = row_exp_sum<T>(xr, nullptr, n, m);
      shift_row<T>(xr, yr, n, static_cast<T>(static_cast<double>(m) + std::log(total)));
    } else {
      const double total = row_exp_sum<T>(xr, yr, n, m);
      scale_row<T>(yr, n, static_cast<T>(1.0 / total));
    }
  }
}

// Softmax along the middle axis of one [n, inner] block, for the columns [c0, c0 + cw), cw <= kColumns.
template <typename T>
NN_INLINE void softmax_columns(const T* x, T* y, int64_t n, int64_t inner, int64_t c0, int64_t cw, bool log) {
  constexpr int64_t L = kLanes<T>;
  const T neg_inf = -std::numeric_limits<T>::infinity();
  alignas(64) T m[kColumns];
  alignas(64) T s[kColumns];
  const int64_t full = cw / L * L;
  for (int64_t c = 0; c < kColumns; c += L) {
    store(m + c, splat<T>(neg_inf));
    store(s + c, Vec<T>{});
  }
  for (int64_t j = 0; j < n; ++j) {
    const T* row = x + j * inner + c0;
    for (int64_t c = 0; c < full; c += L) store(m + c, vmax<T>(load(m + c), load(row + c)));
    if (full < cw) store(m + full, vmax<T>(load(m + full), load_part(row + full, cw - full, neg_inf)));
  }
  for (int64_t j = 0; j < n; ++j) {
    const T* row = x + j * inner + c0;
    T* out = y + j * inner + c0;
    for (int64_t c = 0; c < full; c += L) {
      const Vec<T> e = vexp<T, false>(load(row + c) - load(m + c));
      if (!log) store(out + c, e);
      store(s + c, load(s + c) + e);
    }
    if (full < cw) {
      const Vec<T> e = vexp<T, false>(load_part(row + full, cw - full, neg_inf) - load(m + full));
      if (!log) store_part(out + full, e, cw - full);
      store(s + full, load(s + full) + e);
    }
  }
  if (log) {
    for (int64_t c = 0; c < cw; ++c) s[c] = m[c] + std::log(s[c]);
  } else {
    for (int64_t c = 0; c < cw; ++c) s[c] = T(1) / s[c];
  }
  for (int64_t j = 0; j < n; ++j) {
    const T* row = x + j * inner + c0;
    T* out = y + j * inner + c0;
    int64_t c = 0;
    if (log) {
      for (; c < full; c += L) store(out + c, load(row + c) - load(s + c));
      for (; c < cw; ++c) out[c] = row[c] - s[c];
    } else {
      for (; c < full; c += L) store(out + c, load(out + c) * load(s + c));
      for (; c < cw; ++c) out[c] *= s[c];
    }
  }
}

// ---- layer_norm ------------------------------------------------------------------------------

// sum over a row of x (square == false) or of (x - c)^2 (square == true).
template <typename T>
NN_INLINE double row_moment(const T* x, int64_t n, T c, bool square) {
  constexpr int64_t L = kLanes<T>;
  const Vec<T> cv = splat<T>(c);
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t end = std::min(n, b + kBlock);
    Vec<T> acc0 = Vec<T>{}, acc1 = Vec<T>{};
    int64_t i = b;
    if (square) {
      for (; i + 2 * L <= end; i += 2 * L) {
        const Vec<T> d0 = load(x + i) - cv, d1 = load(x + i + L) - cv;
        acc0 += d0 * d0;
        acc1 += d1 * d1;
      }
      for (; i + L <= end; i += L) {
        const Vec<T> d = load(x + i) - cv;
        acc0 += d * d;
      }
      if (i < end && n >= L) {
        const Vec<T> d = load(x + n - L) - cv;
        acc0 += select(tail_lanes<T>(end - i), d * d, Vec<T>{});
      } else if (i < end) {
        const Vec<T> d = load_part(x + i, end - i, c) - cv;
        acc0 += d * d;
      }
    } else {
      for (; i + 2 * L <= end; i += 2 * L) {
        acc0 += load(x + i);
        acc1 += load(x + i + L);
      }
      for (; i + L <= end; i += L) acc0 += load(x + i);
      if (i < end && n >= L)
        acc0 += select(tail_lanes<T>(end - i), load(x + n - L), Vec<T>{});
      else if (i < end)
        acc0 += load_part(x + i, end - i, T(0));
    }
    total += hsum<T>(acc0 + acc1);
  }
  return total;
}

// y[i:i+kLanes] = (x - mean) * rstd * w + b for one vector of a row (W, B: whether there are w and b).
template <typename T, bool W, bool B>
NN_INLINE void layer_norm_vector(const T* x, T* y, int64_t i, const T* w, const T* b, const Vec<T>& mean,
                                 const Vec<T>& rstd) {
  Vec<T> v = (load(x + i) - mean) * rstd;
  if constexpr (W) v = v * load(w + i);
  if constexpr (B) v = v + load(b + i);
  store(y + i, v);
}

template <typename T, bool W, bool B>
NN_INLINE void layer_norm_apply(const T* x, T* y, int64_t n, const T* w, const T* b, T mean, T rstd) {
  constexpr int64_t L = kLanes<T>;
  const Vec<T> mv = splat<T>(mean), sv = splat<T>(rstd);
  int64_t i = 0;
  for (; i + L <= n; i += L) layer_norm_vector<T, W, B>(x, y, i, w, b, mv, sv);
  if (i < n && n >= L) {
    layer_norm_vector<T, W, B>(x, y, n - L, w, b, mv, sv);
  } else {
    for (; i < n; ++i) {
      T v = (x[i] - mean) * rstd;
      if constexpr (W) v = v * w[i];
      if constexpr (B) v = v + b[i];
      y[i] = v;
    }
  }
}

template <typename T>
NN_INLINE void layer_norm_rows(const T* x, T* y, int64_t n, int64_t r0, int64_t r1, const T* w, const T* b,
                               double eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    const T mean = static_cast<T>(row_moment<T>(xr, n, T(0), false) / n);
    const double var = row_moment<T>(xr, n, mean, true) / n;
    const T rstd = static_cast<T>(1.0 / std::sqrt(var + eps));
    if (w && b)
      layer_norm_apply<T, true, true>(xr, yr, n, w, b, mean, rstd);
    else if (w)
      layer_norm_apply<T, true, false>(xr, yr, n, w, b, mean, rstd);
    else if (b)
      layer_norm_apply<T, false, true>(xr, yr, n, w, b, mean, rstd);
    else
      layer_norm_apply<T, false, false>(xr, yr, n, w, b, mean, rstd);
  }
}

// ---- gelu ----------------------------------------------------------------------------------------

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;
// erfc(z) = t * exp(-z^2 + sum_j c_j t^j), t = 1 / (1 + z/2), z >= 0 (Numerical Recipes, 3rd ed., 6.2.2)
constexpr float kErfcCoeffs[10] = {-1.26551223f, 1.00002368f, 0.37409196f,  0.09678418f, -0.18628806f,
                                   0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};

// Vectors per pack in the elementwise gelu loop.
constexpr int kPack = 8;

// x * Phi(x) for float32 lanes.
template <typename V>
NN_INLINE V gelu_erf_f32(const V& x) {
  const V z = vabs<float>(x) * static_cast<float>(kSqrtHalf);
  const V t = 1.0f / (z * 0.5f + 1.0f);
  V p = broadcast<V>(kErfcCoeffs[9]);
  for (int j = 8; j >= 1; --j) p = p * t + kErfcCoeffs[j];
  p = p * t + (kErfcCoeffs[0] - static_cast<float>(kLn2));  // the factor 1/2 of Phi, inside the exp
  const V q = t * vexp<float, false, false>(p - z * z);  // Phi(-|x|)
  return x * select(less(broadcast<V>(0.0f), x), 1.0f - q, q);
}

// Phi(-w) for w = |x| in [0, 40], float64: t * exp(h(t) - w^2 / 2), t = 1 / (1 + w / 4), where h(t) =
// log(Phi(-w) / t) + w^2 / 2 is smooth on t in [1/11, 1]. Its coefficients below, in powers of
// u = 2.2 t - 1.2 (in [-1, 1]), come from our Chebyshev interpolation of h at 80 nodes (computed with
// 50-digit arithmetic, degree 23 kept); |error| < 7e-16 over the interval, so Phi(-w) keeps its relative
// accuracy (about 1e-15, a few 1e-14 for w > 20 where rounding w^2 / 2 dominates) down to the underflow.
constexpr double kPhiTailCoeffs[24] = {
    -1.592221652976352, 0.76299324179091, 0.15677853156142102, -0.000673459882723313,
    -0.018368741378159286, -0.004727136292797036, 0.002154402412245689, 0.001374503363635953,
    -0.00019017369541313641, -0.0003264543126536835, -6.3798820372033434e-06, 7.134479254532432e-05,
    9.831770240564602e-06, -1.4636205091009893e-05, -3.5750057328902737e-06, 2.796145055482517e-06,
    9.867773715889301e-07, -4.824297480675329e-07, -2.2588914524623133e-07, 7.037665226953146e-08,
    3.9345605825131815e-08, -7.586328642782279e-09, -3.797726524323783e-09, 4.3827883337045574e-10,
};

template <typename V>
NN_INLINE V gelu_erf_f64(const V& x) {
  const V wmax = broadcast<V>(40.0);
  V w = vabs<double>(x);
  w = select(less(wmax, w), wmax, w);  // Phi(-40) underflows; keeps NaN
  const V t = 1.0 / (w * 0.25 + 1.0);
  const V u = t * 2.2 - 1.2;
  V h = broadcast<V>(kPhiTailCoeffs[23]);
  for (int j = 22; j >= 0; --j) h = h * u + kPhiTailCoeffs[j];
  const V q = t * vexp<double, false, false>(h - w * w * 0.5);  // Phi(-|x|)
  return x * select(less(broadcast<V>(0.0), x), 1.0 - q, q);
}

// x / (1 + exp(-2u)), u = sqrt(2/pi) * (x + 0.044715 x^3): PyTorch's tanh approximation.
template <typename T, typename V>
NN_INLINE V gelu_tanh(const V& x) {
  const V u2 = x * (x * x * static_cast<T>(-2 * kSqrt2OverPi * kGeluCubic) + static_cast<T>(-2 * kSqrt2OverPi));
  return x / (vexp<T, true, false>(u2) + T(1));
}

template <typename T, bool Tanh>
NN_INLINE void gelu_loop(const T* x, T* y, int64_t count) {
  using V = Vec<T>;
  using P = Pack<V, kPack>;
  constexpr int64_t L = kLanes<T>, PL = L * kPack;
  auto f = [](const auto& v) NN_INLINE_LAMBDA {
    if constexpr (Tanh)
      return gelu_tanh<T>(v);
    else if constexpr (std::is_same_v<T, float>)
      return gelu_erf_f32(v);
    else
      return gelu_erf_f64(v);
  };
  int64_t i = 0;
  for (; i + PL <= count; i += PL) store_as(y + i, f(load_as<P>(x + i)));
  for (; i + L <= count; i += L) store_as(y + i, f(load_as<V>(x + i)));
  if (i < count) store_part(y + i, f(load_part(x + i, count - i, T(0))), count - i);
}

template <typename T>
NN_INLINE void gelu_range(const T* x, T* y, int64_t count, bool tanh) {
  if (tanh)
    gelu_loop<T, true>(x, y, count);
  else
    gelu_loop<T, false>(x, y, count);
}

// ---- cross_entropy ---------------------------------------------------------------------------

// Per row: lse[r] = log(sum(exp(x))) and, when dot is given, dot[r] = sum_c w_c x_c (w_c = 1 without weight).
template <typename T>
NN_INLINE void logsumexp_rows(const T* x, int64_t n, int64_t r0, int64_t r1, const T* w, double* lse, double* dot) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    const T m = row_max<T>(xr, n);
    // +inf or only -inf: x - m is NaN somewhere, so the row's loss is NaN, as in PyTorch
    lse[r] = static_cast<double>(m) + std::log(row_exp_sum<T>(xr, nullptr, n, m));
    if (!dot) continue;
    if (!w) {
      dot[r] = row_moment<T>(xr, n, T(0), false);
      continue;
    }
    constexpr int64_t L = kLanes<T>;
    double total = 0;
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t end = std::min(n, b + kBlock);
      Vec<T> acc = Vec<T>{};
      int64_t i = b;
      for (; i + L <= end; i += L) acc += load(xr + i) * load(w + i);
      if (i < end && n >= L)
        acc += select(tail_lanes<T>(end - i), load(xr + n - L) * load(w + n - L), Vec<T>{});
      else if (i < end)
        acc += load_part(xr + i, end - i, T(0)) * load_part(w + i, end - i, T(0));
      total += hsum<T>(acc);
    }
    dot[r] = total;
  }
}

// ---- instruction sets ------------------------------------------------------------------------

template <typename T>
struct Kernels {
  void (*softmax_rows)(const T*, T*, int64_t, int64_t, int64_t, bool);
  void (*softmax_columns)(const T*, T*, int64_t, int64_t, int64_t, int64_t, bool);
  void (*layer_norm_rows)(const T*, T*, int64_t, int64_t, int64_t, const T*, const T*, double);
  void (*gelu_range)(const T*, T*, int64_t, bool);
  void (*logsumexp_rows)(const T*, int64_t, int64_t, int64_t, const T*, double*, double*);
};

// The entry points compiled for one instruction set (TARGET: a GCC target attribute or nothing).
#define EMBER_NN_VARIANT(NS, TARGET)                                                                        \
  namespace NS {                                                                                            \
  template <typename T>                                                                                     \
  TARGET void softmax_rows_k(const T* x, T* y, int64_t n, int64_t r0, int64_t r1, bool log) {               \
    softmax_rows<T>(x, y, n, r0, r1, log);                                                                  \
  }                                                                                                         \
  template <typename T>                                                                                     \
  TARGET void softmax_columns_k(const T* x, T* y, int64_t n, int64_t inner, int64_t c0, int64_t cw,         \
                                bool log) {                                                                 \
    softmax_columns<T>(x, y, n, inner, c0, cw, log);                                                        \
  }                                                                                                         \
  template <typename T>                                                                                     \
  TARGET void layer_norm_rows_k(const T* x, T* y, int64_t n, int64_t r0, int64_t r1, const T* w,            \
                                const T* b, double eps) {                                                   \
    layer_norm_rows<T>(x, y, n, r0, r1, w, b, eps);                                                         \
  }                                                                                                         \
  template <typename T>                                                                                     \
  TARGET void gelu_range_k(const T* x, T* y, int64_t count, bool tanh) {                                    \
    gelu_range<T>(x, y, count, tanh);                                                                       \
  }                                                                                                         \
  template <typename T>                                                                                     \
  TARGET void logsumexp_rows_k(const T* x, int64_t n, int64_t r0, int64_t r1, const T* w, double* lse,      \
                               double* dot) {                                                               \
    logsumexp_rows<T>(x, n, r0, r1, w, lse, dot);                                                           \
  }                                                                                                         \
  template <typename T>                                                                                     \
  Kernels<T> table() {                                                                                      \
    return {&softmax_rows_k<T>, &softmax_columns_k<T>, &layer_norm_rows_k<T>, &gelu_range_k<T>,             \
            &logsumexp_rows_k<T>};                                                                          \
  }                                                                                                         \
  }

EMBER_NN_VARIANT(baseline, )
#if defined(__x86_64__) || defined(__i386__)
EMBER_NN_VARIANT(avx2, __attribute__((target("avx2,fma"))))
EMBER_NN_VARIANT(avx512, __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma,prefer-vector-width=512"))))
#endif

enum Isa { kAvx512 = 0, kAvx2 = 1, kBaseline = 2 };
constexpr const char* kIsaNames[] = {"avx512", "avx2", "baseline"};

bool isa_supported(int isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (isa == kAvx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("fma");
  if (isa == kAvx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return isa == kBaseline;
}

int best_isa() {
  for (int isa = kAvx512; isa < kBaseline; ++isa)
    if (isa_supported(isa)) return isa;
  return kBaseline;
}

int g_isa = best_isa();

template <typename T>
const Kernels<T>& kernels() {
  static const Kernels<T> tables[] = {
#if defined(__x86_64__) || defined(__i386__)
      avx512::table<T>(), avx2::table<T>(),
#else
      baseline::table<T>(), baseline::table<T>(),
#endif
      baseline::table<T>()};
  return tables[g_isa];
}

std::string set_nn_isa(const std::string& name) {
  const std::string previous = kIsaNames[g_isa];
  for (int isa = kAvx512; isa <= kBaseline; ++isa) {
    if (name == kIsaNames[isa]) {
      if (!isa_supported(isa)) throw std::invalid_argument("set_nn_isa: this CPU lacks " + name);
      g_isa = isa;
      return previous;
    }
  }
  throw std::invalid_argument("set_nn_isa: unknown instruction set '" + name + "' (expected avx512, avx2 or baseline)");
}

std::vector<std::string> supported_nn_isas() {
  std::vector<std::string> names;
  for (int isa = kAvx512; isa <= kBaseline; ++isa)
    if (isa_supported(isa)) names.push_back(kIsaNames[isa]);
  return names;
}

// ---- argument checks (memory safety only: the op's meta function checked the rest) ----------

bool is_float(const py::array& a) { return a.dtype().is(py::dtype::of<float>()); }
bool is_double(const py::array& a) { return a.dtype().is(py::dtype::of<double>()); }

void require_contiguous(const py::array& a, const char* fn, const char* what) {
  if (!(a.flags() & py::array::c_style))
    throw std::invalid_argument(std::string(fn) + ": " + what + " must be C-contiguous");
}

void require_float(const py::array& a, const char* fn) {
  if (!is_float(a) && !is_double(a)) throw std::invalid_argument(std::string(fn) + ": expected float32 or float64");
  require_contiguous(a, fn, "input");
}

void require_like(const py::array& a, const py::array& like, int64_t size, const char* fn, const char* what) {
  if (!a.dtype().is(like.dtype())) throw std::invalid_argument(std::string(fn) + ": " + what + " differs in dtype");
  require_contiguous(a, fn, what);
  if (a.size() != size) throw std::invalid_argument(std::string(fn) + ": " + what + " has the wrong size");
}

std::vector<py::ssize_t> shape_of(const py::array& a) { return std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()); }

int64_t prod(const py::array& a, int64_t first, int64_t last) {
  int64_t p = 1;
  for (int64_t k = first; k < last; ++k) p *= a.shape(k);
  return p;
}

// Row range [r0, r1) of thread t among nt for `rows` rows.
void split(int64_t rows, int t, int nt, int64_t& r0, int64_t& r1) {
  r0 = rows * t / nt;
  r1 = rows * (t + 1) / nt;
}

// ---- drivers ---------------------------------------------------------------------------------------

template <typename T>
void softmax_run(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  const Kernels<T>& k = kernels<T>();
  const bool parallel = outer * n * inner >= kParallelWork && max_threads() > 1;
  (void)parallel;  // unused without OpenMP
  if (inner == 1) {
#pragma omp parallel if (parallel)
    {
      int64_t r0, r1;
      split(outer, thread_id(), team_size(), r0, r1);
      k.softmax_rows(x, y, n, r0, r1, log);
    }
    return;
  }
  const int64_t chunks = (inner + kColumns - 1) / kColumns;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t task = 0; task < outer * chunks; ++task) {
    const int64_t o = task / chunks, c0 = task % chunks * kColumns;
    k.softmax_columns(x + o * n * inner, y + o * n * inner, n, inner, c0, std::min(kColumns, inner - c0), log);
  }
}

template <typename T>
py::array softmax_typed(const py::array& input, int64_t dim, bool log) {
  const int64_t ndim = input.ndim();
  const int64_t outer = prod(input, 0, dim), n = input.shape(dim), inner = prod(input, dim + 1, ndim);
  py::array_t<T> out(shape_of(input));
  if (outer * n * inner > 0) {
    const T* x = static_cast<const T*>(input.data());
    T* y = out.mutable_data();
    py::gil_scoped_release release;
    softmax_run<T>(x, y, outer, n, inner, log);
  }
  return out;
}

// Softmax (or log-softmax) of a C-contiguous float32/float64 array along dim; a new array.
py::array softmax(const py::array& input, int64_t dim, bool log) {
  require_float(input, "softmax");
  if (dim < 0 || dim >= input.ndim()) throw std::invalid_argument("softmax: dim out of range");
  return is_float(input) ? softmax_typed<float>(input, dim, log) : softmax_typed<double>(input, dim, log);
}

template <typename T>
py::array layer_norm_typed(const py::array& input, int64_t n, const std::optional<py::array>& weight,
                           const std::optional<py::array>& bias, double eps) {
  const int64_t rows = input.size() / n;
  py::array_t<T> out(shape_of(input));
  const T* x = static_cast<const T*>(input.data());
  const T* w = weight ? static_cast<const T*>(weight->data()) : nullptr;
  const T* b = bias ? static_cast<const T*>(bias->data()) : nullptr;
  T* y = out.mutable_data();
  const Kernels<T>& k = kernels<T>();
  {
    py::gil_scoped_release release;
    const bool parallel = rows > 1 && rows * n >= kParallelWork && max_threads() > 1;
    (void)parallel;  // unused without OpenMP
#pragma omp parallel if (parallel)
    {
      int64_t r0, r1;
      split(rows, thread_id(), team_size(), r0, r1);
      k.layer_norm_rows(x, y, n, r0, r1, w, b, eps);
    }
  }
  return out;
}

// layer_norm over the trailing `n` elements of each row of a C-contiguous float32/float64 array.
py::array layer_norm(const py::array& input, int64_t n, const std::optional<py::array>& weight,
                     const std::optional<py::array>& bias, double eps) {
  require_float(input, "layer_norm");
  if (n <= 0 || input.size() % n != 0) throw std::invalid_argument("layer_norm: the row length does not divide the size");
  if (weight) require_like(*weight, input, n, "layer_norm", "weight");
  if (bias) require_like(*bias, input, n, "layer_norm", "bias");
  return is_float(input) ? layer_norm_typed<float>(input, n, weight, bias, eps)
                         : layer_norm_typed<double>(input, n, weight, bias, eps);
}

template <typename T>
py::array gelu_typed(const py::array& input, bool tanh) {
  const int64_t count = input.size();
  py::array_t<T> out(shape_of(input));
  const T* x = static_cast<const T*>(input.data());
  T* y = out.mutable_data();
  const Kernels<T>& k = kernels<T>();
  const bool parallel = count >= kParallelWork && max_threads() > 1;
  (void)parallel;  // unused without OpenMP
  {
    py::gil_scoped_release release;
#pragma omp parallel if (parallel)
    {
      // whole vectors per thread
      const int64_t blocks = (count + kLanes<T> - 1) / kLanes<T>;
      int64_t i0, i1;
      split(blocks, thread_id(), team_size(), i0, i1);
      i0 *= kLanes<T>;
      i1 = std::min(count, i1 * kLanes<T>);
      if (i0 < i1) k.gelu_range(x + i0, y + i0, i1 - i0, tanh);
    }
  }
  return out;
}

// gelu of a C-contiguous float32/float64 array: exact (erf) or approximate='tanh'.
py::array gelu(const py::array& input, bool tanh) {
  require_float(input, "gelu");
  return is_float(input) ? gelu_typed<float>(input, tanh) : gelu_typed<double>(input, tanh);
}

// reduction: 0 'none' (per-row losses), 1 'mean', 2 'sum'.
template <typename T>
py::array cross_entropy_typed(const py::array& input, const py::array& target, const std::optional<py::array>& weight,
                              int64_t ignore_index, double label_smoothing, int reduction) {
  const int64_t rows = input.shape(0), classes = input.shape(1);
  const T* x = static_cast<const T*>(input.data());
  const int64_t* t = static_cast<const int64_t*>(target.data());
  const T* w = weight ? static_cast<const T*>(weight->data()) : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] != ignore_index && (t[r] < 0 || t[r] >= classes))
      throw py::index_error("Target " + std::to_string(t[r]) + " is out of bounds.");
  }
  const bool smooth = label_smoothing > 0;
  std::vector<double> lse(rows), dot(smooth ? rows : 0);
  const Kernels<T>& k = kernels<T>();
  {
    py::gil_scoped_release release;
    const bool parallel = rows > 1 && rows * classes >= kParallelWork && max_threads() > 1;
    (void)parallel;  // unused without OpenMP
#pragma omp parallel if (parallel)
    {
      int64_t r0, r1;
      split(rows, thread_id(), team_size(), r0, r1);
      k.logsumexp_rows(x, classes, r0, r1, w, lse.data(), smooth ? dot.data() : nullptr);
    }
  }
  double weight_sum = 0;
  if (smooth && w) {
    for (int64_t c = 0; c < classes; ++c) weight_sum += w[c];
  }
  const double keep = 1 - label_smoothing, spread = label_smoothing / classes;
  // loss_r = keep * w_t * (lse - x_t) + spread * (lse * sum(w) - sum_c w_c x_c), 0 where ignored
  double total = 0, total_weight = 0;
  py::array_t<T> out(reduction == 0 ? std::vector<py::ssize_t>{static_cast<py::ssize_t>(rows)}
                                    : std::vector<py::ssize_t>{});
  T* y = out.mutable_data();
  for (int64_t r = 0; r < rows; ++r) {
    double loss = 0;
    if (t[r] != ignore_index) {
      const double wt = w ? static_cast<double>(w[t[r]]) : 1.0;
      loss = (lse[r] - static_cast<double>(x[r * classes + t[r]])) * wt;
      if (smooth) loss = keep * loss + spread * (lse[r] * (w ? weight_sum : static_cast<double>(classes)) - dot[r]);
      total_weight += wt;
    }
    if (reduction == 0) y[r] = static_cast<T>(loss);
    total += loss;
  }
  if (reduction == 1) y[0] = static_cast<T>(total / total_weight);
  if (reduction == 2) y[0] = static_cast<T>(total);
  return out;
}

// Cross entropy of (M, C) logits with int64 class indices (M,): the fused log_softmax + pick + reduction.
py::array cross_entropy(const py::array& input, const py::array& target, const std::optional<py::array>& weight,
                        int64_t ignore_index, double label_smoothing, int reduction) {
  require_float(input, "cross_entropy");
  if (input.ndim() != 2) throw std::invalid_argument("cross_entropy: expected a 2-D input");
  if (!target.dtype().is(py::dtype::of<int64_t>()) || target.ndim() != 1 || target.shape(0) != input.shape(0))
    throw std::invalid_argument("cross_entropy: expected an int64 target of shape (M,)");
  require_contiguous(target, "cross_entropy", "target");
  if (weight) require_like(*weight, input, input.shape(1), "cross_entropy", "weight");
  if (reduction < 0 || reduction > 2) throw std::invalid_argument("cross_entropy: reduction must be 0, 1 or 2");
  return is_float(input) ? cross_entropy_typed<float>(input, target, weight, ignore_index, label_smoothing, reduction)
                         : cross_entropy_typed<double>(input, target, weight, ignore_index, label_smoothing, reduction);
}

// ---- gather / scatter_add ----------------------------------------------------------------------
// input/out: [outer, m, inner]; index (and src): [outer, n, inner]; positions along the middle axis.

[[noreturn]] void throw_bad_index(int64_t value, int64_t dim, int64_t size) {
  throw std::runtime_error("index " + std::to_string(value) + " is out of bounds for dimension " +
                           std::to_string(dim) + " with size " + std::to_string(size));
}

template <typename I>
void check_indices(const I* idx, int64_t count, int64_t size, int64_t dim) {
  bool bad = false;
  const bool parallel = count >= 4 * kParallelWork && max_threads() > 1;
  (void)parallel;  // unused without OpenMP
#pragma omp parallel for schedule(static) reduction(|| : bad) if (parallel)
  for (int64_t b = 0; b < count; b += 4096) {
    const int64_t end = std::min(count, b + 4096);
    bool block_bad = false;
    for (int64_t i = b; i < end; ++i) block_bad |= static_cast<uint64_t>(idx[i]) >= static_cast<uint64_t>(size);
    bad = bad || block_bad;
  }
  if (!bad) return;
  for (int64_t i = 0; i < count; ++i)
    if (idx[i] < 0 || idx[i] >= size) throw_bad_index(idx[i], dim, size);
}

// Rows [r0, r1) of the (outer, n) rows of index: out row r = input[o, index row r, :]; false if an index is
// outside [0, m) (the rows after it are left unwritten).
template <typename E, typename I>
NN_INLINE bool gather_rows(const E* in, const I* idx, E* out, int64_t m, int64_t n, int64_t inner, int64_t r0,
                           int64_t r1) {
  int64_t o = r0 / n, j = r0 % n;
  for (int64_t r = r0; r < r1; j = 0, ++o) {
    const int64_t j_end = std::min(n, j + (r1 - r));
    const E* base = in + o * m * inner;
    if (inner == 1) {
      const I* ir = idx + o * n;
      E* orow = out + o * n;
      for (int64_t jj = j; jj < j_end; ++jj) {
        const I k = ir[jj];
        if (static_cast<uint64_t>(k) >= static_cast<uint64_t>(m)) return false;
        orow[jj] = base[k];
      }
    } else {
      for (int64_t jj = j; jj < j_end; ++jj) {
        const I* ir = idx + (o * n + jj) * inner;
        E* orow = out + (o * n + jj) * inner;
        bool bad = false;
        for (int64_t i = 0; i < inner; ++i) bad |= static_cast<uint64_t>(ir[i]) >= static_cast<uint64_t>(m);
        if (bad) return false;
        for (int64_t i = 0; i < inner; ++i) orow[i] = base[ir[i] * inner + i];
      }
    }
    r += j_end - j;
  }
  return true;
}

template <typename E, typename I>
bool gather_typed(const E* in, const I* idx, E* out, int64_t outer, int64_t m, int64_t n, int64_t inner) {
  const int64_t rows = outer * n;
  const bool parallel = rows > 1 && rows * inner >= kParallelWork && max_threads() > 1;
  (void)parallel;  // unused without OpenMP
  int bad = 0;
#pragma omp parallel if (parallel) reduction(| : bad)
  {
    int64_t r0, r1;
    split(rows, thread_id(), team_size(), r0, r1);
    if (r0 < r1) bad = !gather_rows(in, idx, out, m, n, inner, r0, r1);
  }
  return !bad;
}

template <typename E>
struct Bytes {
  E v;
};

// input[o, index[o, j, i], i] for every (o, j, i): index has input's shape except along dim.
template <typename I>
py::array gather_indexed(const py::array& input, const py::array& index, int64_t dim) {
  const int64_t ndim = input.ndim();
  const int64_t outer = prod(input, 0, dim), m = input.shape(dim), inner = prod(input, dim + 1, ndim);
  const int64_t n = index.shape(dim);
  py::array out(input.dtype(), shape_of(index));
  const I* idx = static_cast<const I*>(index.data());
  const int64_t count = index.size();
  if (count == 0) return out;
  const void* src = input.data();
  void* dst = out.mutable_data();
  bool ok = true;
  {
    py::gil_scoped_release release;
    switch (input.itemsize()) {
      case 1: ok = gather_typed(static_cast<const uint8_t*>(src), idx, static_cast<uint8_t*>(dst), outer, m, n, inner); break;
      case 2: ok = gather_typed(static_cast<const uint16_t*>(src), idx, static_cast<uint16_t*>(dst), outer, m, n, inner); break;
      case 4: ok = gather_typed(static_cast<const uint32_t*>(src), idx, static_cast<uint32_t*>(dst), outer, m, n, inner); break;
      case 8: ok = gather_typed(static_cast<const uint64_t*>(src), idx, static_cast<uint64_t*>(dst), outer, m, n, inner); break;
      default: {
        using B16 = Bytes<uint64_t[2]>;
        ok = gather_typed(static_cast<const B16*>(src), idx, static_cast<B16*>(dst), outer, m, n, inner);
      }
    }
    if (!ok) check_indices<I>(idx, count, m, dim);  // throws with the first bad index
  }
  return out;
}

void require_index_fits(const py::array& big, const py::array& index, int64_t dim, const char* fn) {
  require_contiguous(big, fn, "input");
  require_contiguous(index, fn, "index");
  if (!index.dtype().is(py::dtype::of<int64_t>()) && !index.dtype().is(py::dtype::of<int32_t>()))
    throw std::invalid_argument(std::string(fn) + ": index must be int32 or int64");
  if (index.ndim() != big.ndim() || dim < 0 || dim >= big.ndim())
    throw std::invalid_argument(std::string(fn) + ": index and input differ in dims, or dim is out of range");
  for (int64_t k = 0; k < big.ndim(); ++k)
    if (k != dim && index.shape(k) != big.shape(k))
      throw std::invalid_argument(std::string(fn) + ": index and input differ in size outside dim");
}

// gather along dim with index shaped like input except along dim (any dtype of 1, 2, 4, 8 or 16 bytes).
py::array gather(const py::array& input, int64_t dim, const py::array& index) {
  require_index_fits(input, index, dim, "gather");
  const auto size = input.itemsize();
  if (size != 1 && size != 2 && size != 4 && size != 8 && size != 16)
    throw std::invalid_argument("gather: unsupported element size");
  return index.dtype().is(py::dtype::of<int64_t>()) ? gather_indexed<int64_t>(input, index, dim)
                                                    : gather_indexed<int32_t>(input, index, dim);
}

// ---- embedding: rows of a table picked by indices ---------------------------------------------

// Rows [r0, r1) of out (rows x row_bytes) = table rows idx[r]; false at the first index outside [0, m).
template <typename I>
bool embedding_rows(const char* table, int64_t row_stride, int64_t m, const I* idx, char* out, int64_t row_bytes,
                    int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const I k = idx[r];
    if (static_cast<uint64_t>(k) >= static_cast<uint64_t>(m)) return false;
    std::memcpy(out + r * row_bytes, table + k * row_stride, row_bytes);
  }
  return true;
}

template <typename I>
py::array embedding_indexed(const py::array& weight, const py::array& index) {
  const int64_t m = weight.shape(0), dim = weight.shape(1);
  std::vector<py::ssize_t> shape = shape_of(index);
  shape.push_back(dim);
  py::array out(weight.dtype(), shape);
  const int64_t rows = index.size(), row_bytes = dim * weight.itemsize();
  if (rows == 0 || row_bytes == 0) {
    // no rows to copy, but indices still have to be in range
    const I* idx = static_cast<const I*>(index.data());
    for (int64_t r = 0; r < rows; ++r)
      if (static_cast<uint64_t>(idx[r]) >= static_cast<uint64_t>(m)) throw std::out_of_range("index out of range in self");
    return out;
  }
  const char* table = static_cast<const char*>(weight.data());
  const int64_t row_stride = weight.strides(0);
  const I* idx = static_cast<const I*>(index.data());
  char* dst = static_cast<char*>(out.mutable_data());
  int bad = 0;
  {
    py::gil_scoped_release release;
    // memory-bound: two threads pay off once the copy is some tens of kilobytes
    const bool parallel = rows > 1 && rows * row_bytes >= 4 * kParallelWork && max_threads() > 1;
    (void)parallel;  // unused without OpenMP
#pragma omp parallel if (parallel) reduction(| : bad)
    {
      int64_t r0, r1;
      split(rows, thread_id(), team_size(), r0, r1);
      if (r0 < r1) bad = !embedding_rows<I>(table, row_stride, m, idx, dst, row_bytes, r0, r1);
    }
  }
  if (bad) throw std::out_of_range("index out of range in self");  // IndexError in Python, as PyTorch
  return out;
}

// weight[index]: weight (m, dim) of any dtype with contiguous rows, index int32/int64 C-contiguous of any shape.
py::array embedding(const py::array& weight, const py::array& index) {
  if (weight.ndim() != 2 || (weight.shape(1) > 1 && weight.strides(1) != weight.itemsize()))
    throw std::invalid_argument("embedding: weight must be 2-D with contiguous rows");
  require_contiguous(index, "embedding", "index");
  if (index.dtype().is(py::dtype::of<int64_t>())) return embedding_indexed<int64_t>(weight, index);
  if (index.dtype().is(py::dtype::of<int32_t>())) return embedding_indexed<int32_t>(weight, index);
  throw std::invalid_argument("embedding: index must be int32 or int64");
}

template <typename T, typename I>
NN_INLINE void scatter_add_block(T* out, const I* idx, const T* src, int64_t o0, int64_t o1, int64_t m, int64_t n,
                                 int64_t inner, int64_t j0, int64_t j1, int64_t c0, int64_t c1) {
  for (int64_t o = o0; o < o1; ++o) {
    T* base = out + o * m * inner;
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t row = (o * n + j) * inner;
      const I* ir = idx + row;
      const T* sr = src + row;
      if (inner == 1) {
        base[ir[0]] += sr[0];
      } else {
        for (int64_t c = c0; c < c1; ++c) base[ir[c] * inner + c] += sr[c];
      }
    }
  }
}

// Adds the rows j in [j0, j1) of every outer block into acc (shaped like out), checking the indices;
// false at the first index outside [0, m) (acc is then partly updated).
template <typename T, typename I>
NN_INLINE bool scatter_add_checked(T* acc, const I* idx, const T* src, int64_t outer, int64_t m, int64_t n,
                                   int64_t inner, int64_t j0, int64_t j1) {
  for (int64_t o = 0; o < outer; ++o) {
    T* base = acc + o * m * inner;
    const I* ib = idx + o * n * inner;
    const T* sb = src + o * n * inner;
    if (inner == 1) {
      for (int64_t j = j0; j < j1; ++j) {
        const I k = ib[j];
        if (static_cast<uint64_t>(k) >= static_cast<uint64_t>(m)) return false;
        base[k] += sb[j];
      }
    } else {
      for (int64_t j = j0; j < j1; ++j) {
        for (int64_t c = 0; c < inner; ++c) {
          const I k = ib[j * inner + c];
          if (static_cast<uint64_t>(k) >= static_cast<uint64_t>(m)) return false;
          base[k * inner + c] += sb[j * inner + c];
        }
      }
    }
  }
  return true;
}

template <typename T, typename I>
void scatter_add_typed(T* out, const I* idx, const T* src, int64_t outer, int64_t m, int64_t n, int64_t inner,
                       int64_t dim) {
  const int64_t work = outer * n * inner;
  const int64_t out_size = outer * m * inner;
  const int threads = work >= kParallelWork ? max_threads() : 1;
  if (threads > 1 && (outer >= threads || inner >= 64 * threads)) {
    // disjoint parts of the output per thread: whole [m, inner] blocks, or column ranges
    check_indices<I>(idx, work, m, dim);
    const bool by_outer = outer >= threads;
#pragma omp parallel
    {
      int64_t a0, a1;
      split(by_outer ? outer : inner, thread_id(), team_size(), a0, a1);
      if (by_outer)
        scatter_add_block(out, idx, src, a0, a1, m, n, inner, 0, n, 0, inner);
      else
        scatter_add_block(out, idx, src, 0, outer, m, n, inner, 0, n, a0, a1);
    }
    return;
  }
  if (out_size * threads <= work) {
    // few output elements for many updates: each thread adds its share of the rows into a private zeroed
    // copy of the output, checking the indices as it goes; out is only touched once all are valid
    std::vector<T> partial(static_cast<size_t>(out_size) * threads);
    int bad = 0;
#pragma omp parallel if (threads > 1) num_threads(threads) reduction(| : bad)
    {
      int64_t j0, j1;
      split(n, thread_id(), team_size(), j0, j1);
      T* mine = partial.data() + static_cast<size_t>(out_size) * thread_id();
      bad = !scatter_add_checked(mine, idx, src, outer, m, n, inner, j0, j1);
    }
    if (bad) check_indices<I>(idx, work, m, dim);  // throws with the first bad index
#pragma omp parallel for schedule(static) if (threads > 1 && out_size >= kParallelWork)
    for (int64_t e = 0; e < out_size; ++e) {
      T total = out[e];
      for (int t = 0; t < threads; ++t) total += partial[static_cast<size_t>(out_size) * t + e];
      out[e] = total;
    }
    return;
  }
  check_indices<I>(idx, work, m, dim);
  scatter_add_block(out, idx, src, 0, outer, m, n, inner, 0, n, 0, inner);
}

// out[o, index[o, j, i], i] += src[o, j, i] in place, repeated indices accumulating; src has index's shape, and
// out has it except along dim. Nothing is written when an index is out of range.
void scatter_add_(py::array out, int64_t dim, const py::array& index, const py::array& src) {
  require_index_fits(out, index, dim, "scatter_add_");
  require_float(out, "scatter_add_");
  if (!out.writeable()) throw std::invalid_argument("scatter_add_: out is read-only");
  require_contiguous(src, "scatter_add_", "src");
  if (!src.dtype().is(out.dtype()) || src.ndim() != index.ndim())
    throw std::invalid_argument("scatter_add_: src must have out's dtype and index's shape");
  for (int64_t k = 0; k < index.ndim(); ++k)
    if (src.shape(k) != index.shape(k)) throw std::invalid_argument("scatter_add_: src must have index's shape");
  if (index.size() == 0) return;
  const int64_t ndim = out.ndim();
  const int64_t outer = prod(out, 0, dim), m = out.shape(dim), inner = prod(out, dim + 1, ndim);
  const int64_t n = index.shape(dim);
  const bool wide = index.dtype().is(py::dtype::of<int64_t>());
  void* o = out.mutable_data();
  const void* s = src.data();
  const void* i = index.data();
  py::gil_scoped_release release;
  if (is_float(out)) {
    if (wide)
      scatter_add_typed(static_cast<float*>(o), static_cast<const int64_t*>(i), static_cast<const float*>(s), outer, m,
                        n, inner, dim);
    else
      scatter_add_typed(static_cast<float*>(o), static_cast<const int32_t*>(i), static_cast<const float*>(s), outer, m,
                        n, inner, dim);
  } else {
    if (wide)
      scatter_add_typed(static_cast<double*>(o), static_cast<const int64_t*>(i), static_cast<const double*>(s), outer,
                        m, n, inner, dim);
    else
      scatter_add_typed(static_cast<double*>(o), static_cast<const int32_t*>(i), static_cast<const double*>(s), outer,
                        m, n, inner, dim);
  }
}

}  // namespace

void init_nn_kernels(py::module_& m) {
  m.def("softmax", &softmax, py::arg("x"), py::arg("dim"), py::arg("log") = false,
        "Softmax (log=True: log-softmax) of a C-contiguous float32/float64 array along dim (non-negative).");
  m.def("layer_norm", &layer_norm, py::arg("x"), py::arg("n"), py::arg("weight") = py::none(),
        py::arg("bias") = py::none(), py::arg("eps") = 1e-5,
        "layer_norm over the trailing n elements of each row of a C-contiguous float32/float64 array.");
  m.def("gelu", &gelu, py::arg("x"), py::arg("tanh") = false,
        "gelu of a C-contiguous float32/float64 array (tanh=True: the tanh approximation).");
  m.def("cross_entropy", &cross_entropy, py::arg("x"), py::arg("target"), py::arg("weight") = py::none(),
        py::arg("ignore_index") = -100, py::arg("label_smoothing") = 0.0, py::arg("reduction") = 1,
        "Cross entropy of (M, C) logits and int64 class indices (M,); reduction 0 'none', 1 'mean', 2 'sum'. "
        "Raises IndexError for a target outside [0, C) that is not ignore_index.");
  m.def("gather", &gather, py::arg("input"), py::arg("dim"), py::arg("index"),
        "gather along dim; index (int32/int64, C-contiguous) has input's shape except along dim.");
  m.def("embedding", &embedding, py::arg("weight"), py::arg("index"),
        "weight[index] row by row: weight 2-D with contiguous rows, index int32/int64 C-contiguous; "
        "IndexError for an index outside [0, weight.shape[0]).");
  m.def("scatter_add_", &scatter_add_, py::arg("out"), py::arg("dim"), py::arg("index"), py::arg("src"),
        "out[..., index[..., j, ...], ...] += src[..., j, ...] in place (float32/float64, C-contiguous); src has "
        "index's shape, out has it except along dim; nothing is written when an index is out of range.");
  m.def("set_nn_isa", &set_nn_isa, py::arg("name"),
        "Select the instruction set of the nn kernels ('avx512', 'avx2', 'baseline'); returns the previous one.");
  m.def("supported_nn_isas", &supported_nn_isas, "The instruction sets the nn kernels can use on this CPU.");
}
