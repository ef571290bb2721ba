// ember._C kernels for sum and the scans cumsum/cumprod (ember/_ops/sums.py, scans.py).
//
// Every kernel sees its input as a C-contiguous array folded to [outer, n, inner]
// and works along the middle axis: outer and inner count the elements of the dims
// before and after the reduced (or scanned) dims, n those of the reduced dims.
// inner == 1 is the common "last axis" case and gets its own loops, because
// there the work runs along contiguous memory instead of across it.
//
// Accuracy (float32, float64):
// * sum along contiguous memory: the row is cut into blocks of 32 vectors; 4
//   vectors of lanes accumulate 8 elements each in the input's type, are added
//   pairwise, and each block's lanes go to float64 accumulators, which are
//   flushed every 64 blocks into others. This is a blocked form of pairwise
//   summation (Higham, "The accuracy of floating point summation", SIAM J.
//   Sci. Comput. 14(4), 1993): the error grows with the block length and
//   slowly with the row length, not in proportion to it as in a single running
//   sum. Rows shorter than a block combine their lanes pairwise in the input's
//   type.
// * sum across rows (inner > 1): the elements of 8 rows are added pairwise,
//   16 rows are accumulated in the input's type, then added to float64
//   accumulators. With fewer columns than a vector holds, the array is read as
//   one stream whose lanes each keep to one column, summed as along a row.
// * cumsum/cumprod: float32 accumulates in float64 and rounds each output once
//   (as PyTorch's CPU kernel does: its float32 results equal the float64 scan
//   rounded to float32); float64 accumulates in float64. A long single row is
//   scanned as 4 interleaved segments (to hide the latency of the additions),
//   and over threads as pieces, each starting from the float64 total of what
//   precedes it. int64 wraps around on overflow, like numpy and PyTorch (the
//   arithmetic is done on uint64, where wrapping is defined).
//
// Speed: the inner loops use GCC vector extensions of 64 bytes and are compiled
// three times, for AVX-512, AVX2 and the x86-64 baseline; the best one that the
// CPU supports is chosen at import (set_reduce_isa switches, for tests). OpenMP
// splits the work over independent rows (or over column blocks, or over pieces
// of one long row) when there is enough of it (kParallelSum, kParallelWork).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#ifdef EMBER_HAS_OPENMP
#include <omp.h>
#endif

#if !defined(__GNUC__)
#error "reduce.cpp needs GCC or Clang (vector extensions, target attributes)"
#endif

namespace py = pybind11;

// The 64-byte vector types below only live inside always-inline functions, so the note that
// passing them by value has no stable ABI without AVX-512 does not concern us.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

// Work (elements) below which a kernel runs on one thread: a parallel region costs more.
constexpr int64_t kParallelWork = 1 << 15;
// Sums stream through memory fast enough that smaller ones stay on one thread.
constexpr int64_t kParallelSum = 1 << 16;

int max_threads() {
#ifdef EMBER_HAS_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

#define EMBER_ALWAYS_INLINE inline __attribute__((always_inline))

// ---- types --------------------------------------------------------------------------------
// Lane: what the lanes of a sum block accumulate in; Acc: what block results and scans
// accumulate in. V is 64 bytes of Lane, A the same number of Acc values.

template <typename T>
struct Types;

template <>
struct Types<float> {
  using Lane = float;
  using Acc = double;
  typedef float V __attribute__((vector_size(64)));
  typedef double A __attribute__((vector_size(128)));
};

template <>
struct Types<double> {
  using Lane = double;
  using Acc = double;
  typedef double V __attribute__((vector_size(64)));
  typedef double A __attribute__((vector_size(64)));
};

template <>
struct Types<int64_t> {
  using Lane = uint64_t;
  using Acc = uint64_t;
  typedef uint64_t V __attribute__((vector_size(64)));
  typedef uint64_t A __attribute__((vector_size(64)));
};

template <typename T>
using LaneOf = typename Types<T>::Lane;
template <typename T>
using AccOf = typename Types<T>::Acc;
template <typename T>
using VecOf = typename Types<T>::V;
template <typename T>
using AccVecOf = typename Types<T>::A;

template <typename T>
constexpr int kWidth = 64 / sizeof(T);  // elements in one V

// Blocks of the row sum: kSteps steps of 4 vectors; a float64 accumulator takes kFlush blocks.
constexpr int kSteps = 8;
constexpr int kFlush = 64;
// Columns handled together by the middle-axis kernels (their accumulators stay in L1).
constexpr int64_t kColumns = 256;
// Rows accumulated in the input's type before they go to the float64 accumulators.
constexpr int64_t kRowBlock = 16;
// A single row at least this long is scanned as 4 interleaved segments.
constexpr int64_t kSegmentedScan = 4096;

template <typename T>
EMBER_ALWAYS_INLINE VecOf<T> load(const T* p) {
  VecOf<T> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <typename T>
EMBER_ALWAYS_INLINE AccVecOf<T> widen(const VecOf<T>& v) {
  return __builtin_convertvector(v, AccVecOf<T>);
}

// Pairwise sum of the N elements of a vector of E, by halves.
template <typename E, int N>
struct VecN {
  typedef E type __attribute__((vector_size(sizeof(E) * N)));
};

template <typename E, int N>
EMBER_ALWAYS_INLINE E horizontal_sum(const typename VecN<E, N>::type& v) {
  if constexpr (N == 2) {
    return v[0] + v[1];
  } else {
    using H = typename VecN<E, N / 2>::type;
    H lo, hi;
    std::memcpy(&lo, &v, sizeof(H));
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof(H), sizeof(H));
    return horizontal_sum<E, N / 2>(lo + hi);
  }
}

template <typename T>
EMBER_ALWAYS_INLINE AccOf<T> hsum_acc(const AccVecOf<T>& v) {
  return horizontal_sum<AccOf<T>, kWidth<T>>(v);
}

template <typename T>
EMBER_ALWAYS_INLINE LaneOf<T> hsum_lane(const VecOf<T>& v) {
  return horizontal_sum<LaneOf<T>, kWidth<T>>(v);
}

// v with its first W - k lanes zeroed (keeps the last k).
template <typename T>
EMBER_ALWAYS_INLINE VecOf<T> keep_last(const VecOf<T>& v, int64_t k) {
  using Mask = typename VecN<std::conditional_t<sizeof(T) == 4, int32_t, int64_t>, kWidth<T>>::type;
  Mask lane = {};
  for (int j = 0; j < kWidth<T>; ++j) lane[j] = j;
  return lane >= static_cast<typename std::remove_reference_t<decltype(lane[0])>>(kWidth<T> - k) ? v : VecOf<T>{};
}

// ---- sum ----------------------------------------------------------------------------------

// Sum of n contiguous elements, blocked-pairwise as described at the top. Rows shorter than a
// block are combined in the input's type (each lane then holds at most 32 elements).
template <typename T>
EMBER_ALWAYS_INLINE AccOf<T> sum_contiguous(const T* x, int64_t n) {
  using V = VecOf<T>;
  using A = AccVecOf<T>;
  using Lane = LaneOf<T>;
  constexpr int W = kWidth<T>;
  constexpr int64_t block = int64_t(kSteps) * 4 * W;
  if (n < W) {
    Lane total = 0;
    for (int64_t i = 0; i < n; ++i) total += static_cast<Lane>(x[i]);
    return total;
  }
  int64_t i = 0;
  A mid = {}, top = {};
  if (n >= block) {
    int filled = 0;
    for (; i + block <= n; i += block) {
      const T* p = x + i;
      V a = load(p), b = load(p + W), c = load(p + 2 * W), d = load(p + 3 * W);
      for (int s = 1; s < kSteps; ++s) {
        p += 4 * W;
        a += load(p);
        b += load(p + W);
        c += load(p + 2 * W);
        d += load(p + 3 * W);
      }
      mid += widen<T>((a + b) + (c + d));
      if (++filled == kFlush) {
        top += mid;
        mid = A{};
        filled = 0;
      }
    }
  }
  // The last partial block: whole steps of 4 vectors, single vectors, and the last elements as the
  // end of the vector that ends the row (its lanes already counted zeroed).
  V a = {}, b = {}, c = {}, d = {};
  for (; i + 4 * W <= n; i += 4 * W) {
    a += load(x + i);
    b += load(x + i + W);
    c += load(x + i + 2 * W);
    d += load(x + i + 3 * W);
  }
  for (; i + W <= n; i += W) a += load(x + i);
  if (i < n) b += keep_last<T>(load(x + n - W), n - i);
  const V part = (a + b) + (c + d);
  if (n < block) return static_cast<AccOf<T>>(hsum_lane<T>(part));
  return hsum_acc<T>((top + mid) + widen<T>(part));
}

// out[r] = sum of row r, for rows [r0, r1) of x [rows, n] (n >= 1).
template <typename T>
EMBER_ALWAYS_INLINE void sum_rows(const T* x, int64_t n, int64_t r0, int64_t r1, T* out) {
  constexpr int W = kWidth<T>;
  int64_t r = r0;
  if (n < W) {
    // Rows shorter than a vector: the vector that ends the row reaches back into the rows
    // before it (still inside the array), whose lanes are zeroed.
    for (; r < r1 && (r + 1) * n < W; ++r) out[r] = static_cast<T>(sum_contiguous(x + r * n, n));
    for (; r < r1; ++r) out[r] = static_cast<T>(hsum_lane<T>(keep_last<T>(load(x + (r + 1) * n - W), n)));
    return;
  }
  for (; r < r1; ++r) out[r] = static_cast<T>(sum_contiguous(x + r * n, n));
}

// out[j] = sum over r of x[r, j] for x [R, inner] with inner < W: the array is read as one
// contiguous stream, in periods of lcm(inner, W) elements (m vectors), within which lane l of
// vector v always holds column (v * W + l) % inner. Lanes are flushed to float64 as in
// sum_contiguous, and folded into their columns at the end. (A period may span several lcms.)
template <typename T, typename Out>
EMBER_ALWAYS_INLINE void sum_narrow_columns(const T* x, int64_t R, int64_t inner, Out* out) {
  using V = VecOf<T>;
  using A = AccVecOf<T>;
  using Acc = AccOf<T>;
  constexpr int W = kWidth<T>;
  int64_t m = inner / std::gcd(inner, int64_t(W));
  m *= (4 + m - 1) / m;  // at least 4 vectors (independent additions) per period
  const int64_t period = m * W, total = R * inner;
  V lo[W];
  A mid[W], top[W];
  for (int64_t v = 0; v < m; ++v) {
    lo[v] = V{};
    mid[v] = top[v] = A{};
  }
  int64_t i = 0;
  int steps = 0, filled = 0;
  for (; i + period <= total; i += period) {
    for (int64_t v = 0; v < m; ++v) lo[v] += load(x + i + v * W);
    if (++steps == 4 * kSteps) {
      for (int64_t v = 0; v < m; ++v) {
        mid[v] += widen<T>(lo[v]);
        lo[v] = V{};
      }
      steps = 0;
      if (++filled == kFlush) {
        for (int64_t v = 0; v < m; ++v) {
          top[v] += mid[v];
          mid[v] = A{};
        }
        filled = 0;
      }
    }
  }
  Acc column[W] = {};
  for (int64_t v = 0; v < m; ++v) {
    const A lanes = (top[v] + mid[v]) + widen<T>(lo[v]);
    for (int l = 0; l < W; ++l) column[(v * W + l) % inner] += lanes[l];
  }
  for (; i < total; ++i) column[i % inner] += static_cast<Acc>(x[i]);  // i % period == 0 at the start
  for (int64_t j = 0; j < inner; ++j) out[j] = static_cast<Out>(column[j]);
}

// out[c0 + j] = sum over r of x[r, c0 + j] for j < cw, for x [R, inner] (one outer index).
// Out is T, or the accumulator type for partial sums that are added up afterwards. The columns
// go in vectors; when cw is not a multiple of W, the last vector ends at the last column and
// overlaps the one before it, and only its new lanes are written.
template <typename T, typename Out>
EMBER_ALWAYS_INLINE void sum_columns(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw, Out* out) {
  using V = VecOf<T>;
  using A = AccVecOf<T>;
  constexpr int W = kWidth<T>;
  if (inner < W) return sum_narrow_columns<T, Out>(x, R, inner, out);  // then c0 == 0, cw == inner
  constexpr int64_t kMaxVectors = kColumns / W + 1;
  const int64_t full = cw / W, rem = cw % W, nv = full + (rem ? 1 : 0);
  int64_t offset[kMaxVectors];
  V lo[kMaxVectors];
  A acc[kMaxVectors];
  for (int64_t v = 0; v < nv; ++v) {
    offset[v] = v < full ? c0 + v * W : c0 + cw - W;
    acc[v] = A{};
  }
  int64_t r = 0;
  while (r < R) {
    const int64_t r_end = std::min(R, r + kRowBlock);
    for (int64_t v = 0; v < nv; ++v) lo[v] = V{};
    for (; r + 8 <= r_end; r += 8) {
      const T* row = x + r * inner;
      for (int64_t v = 0; v < nv; ++v) {
        const T* p = row + offset[v];
        const T* q = p + 4 * inner;
        lo[v] += ((load(p) + load(p + inner)) + (load(p + 2 * inner) + load(p + 3 * inner))) +
                 ((load(q) + load(q + inner)) + (load(q + 2 * inner) + load(q + 3 * inner)));
      }
    }
    for (; r < r_end; ++r)
      for (int64_t v = 0; v < nv; ++v) lo[v] += load(x + r * inner + offset[v]);
    for (int64_t v = 0; v < nv; ++v) acc[v] += widen<T>(lo[v]);
  }
  for (int64_t v = 0; v < nv; ++v)
    for (int l = v < full ? 0 : W - int(rem); l < W; ++l) out[offset[v] + l] = static_cast<Out>(acc[v][l]);
}

// ---- scans --------------------------------------------------------------------------------

struct AddOp {
  template <typename A>
  static EMBER_ALWAYS_INLINE A apply(A a, A b) {
    return a + b;
  }
  template <typename A>
  static constexpr A identity() {
    return A(0);
  }
};

struct MulOp {
  template <typename A>
  static EMBER_ALWAYS_INLINE A apply(A a, A b) {
    return a * b;
  }
  template <typename A>
  static constexpr A identity() {
    return A(1);
  }
};

// Sum of n elements in the scan's accumulator type (the offsets of a segmented cumsum).
template <typename T>
EMBER_ALWAYS_INLINE AccOf<T> acc_total(const T* x, int64_t n) {
  using A = AccVecOf<T>;
  constexpr int W = kWidth<T>;
  A a = {}, b = {};
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    a += widen<T>(load(x + i));
    b += widen<T>(load(x + i + W));
  }
  AccOf<T> total = hsum_acc<T>(a + b);
  for (; i < n; ++i) total += static_cast<AccOf<T>>(x[i]);
  return total;
}

// Scan of one row of n elements, starting from init (the scan of what precedes it).
template <typename T, typename Op>
EMBER_ALWAYS_INLINE void scan_row(const T* x, T* y, int64_t n, AccOf<T> init) {
  using Acc = AccOf<T>;
  int64_t i = 0;
  if constexpr (std::is_same_v<Op, AddOp>) {
    if (n >= kSegmentedScan) {
      // Four segments scanned side by side: four independent dependency chains. Each starts
      // from the total of the segments before it.
      const int64_t m = n / 4;
      Acc s0 = init;
      Acc s1 = s0 + acc_total(x, m);
      Acc s2 = s1 + acc_total(x + m, m);
      Acc s3 = s2 + acc_total(x + 2 * m, m);
      const T* x1 = x + m;
      const T* x2 = x + 2 * m;
      const T* x3 = x + 3 * m;
      T* y1 = y + m;
      T* y2 = y + 2 * m;
      T* y3 = y + 3 * m;
      for (int64_t k = 0; k < m; ++k) {
        s0 += Acc(x[k]);
        s1 += Acc(x1[k]);
        s2 += Acc(x2[k]);
        s3 += Acc(x3[k]);
        y[k] = T(s0);
        y1[k] = T(s1);
        y2[k] = T(s2);
        y3[k] = T(s3);
      }
      i = 4 * m;
      init = s3;
    }
  }
  Acc s = init;
  for (; i < n; ++i) {
    s = Op::apply(s, Acc(x[i]));
    y[i] = T(s);
  }
}

// Scans of rows [r0, r1) of x [rows, n], four rows side by side (four independent dependency
// chains, each exactly the running scan of its row); the rows left over one by one.
template <typename T, typename Op>
EMBER_ALWAYS_INLINE void scan_rows(const T* x, T* y, int64_t n, int64_t r0, int64_t r1) {
  using Acc = AccOf<T>;
  constexpr Acc id = Op::template identity<Acc>();
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const T* x0 = x + r * n;
    const T* x1 = x0 + n;
    const T* x2 = x1 + n;
    const T* x3 = x2 + n;
    T* y0 = y + r * n;
    T* y1 = y0 + n;
    T* y2 = y1 + n;
    T* y3 = y2 + n;
    Acc s0 = id, s1 = id, s2 = id, s3 = id;
    for (int64_t k = 0; k < n; ++k) {
      s0 = Op::apply(s0, Acc(x0[k]));
      s1 = Op::apply(s1, Acc(x1[k]));
      s2 = Op::apply(s2, Acc(x2[k]));
      s3 = Op::apply(s3, Acc(x3[k]));
      y0[k] = T(s0);
      y1[k] = T(s1);
      y2[k] = T(s2);
      y3[k] = T(s3);
    }
  }
  for (; r < r1; ++r) scan_row<T, Op>(x + r * n, y + r * n, n, id);
}

// Scan along the middle axis of x [n, inner] (one outer index), columns [c0, c0 + cw).
template <typename T, typename Op>
EMBER_ALWAYS_INLINE void scan_columns(const T* x, T* y, int64_t n, int64_t inner, int64_t c0, int64_t cw) {
  using Acc = AccOf<T>;
  Acc acc[kColumns];
  for (int64_t j = 0; j < cw; ++j) acc[j] = Op::template identity<Acc>();
  for (int64_t i = 0; i < n; ++i) {
    const T* p = x + i * inner + c0;
    T* q = y + i * inner + c0;
    for (int64_t j = 0; j < cw; ++j) {
      acc[j] = Op::apply(acc[j], Acc(p[j]));
      q[j] = T(acc[j]);
    }
  }
}

// ---- one table of entry points per instruction set ----------------------------------------

template <typename T>
struct Kernels {
  AccOf<T> (*sum_contiguous)(const T*, int64_t);
  void (*sum_rows)(const T*, int64_t, int64_t, int64_t, T*);
  void (*sum_columns)(const T*, int64_t, int64_t, int64_t, int64_t, T*);
  void (*sum_columns_partial)(const T*, int64_t, int64_t, int64_t, int64_t, AccOf<T>*);
  AccOf<T> (*acc_total)(const T*, int64_t);
  void (*cumsum_row)(const T*, T*, int64_t, AccOf<T>);
  void (*cumsum_rows)(const T*, T*, int64_t, int64_t, int64_t);
  void (*cumprod_rows)(const T*, T*, int64_t, int64_t, int64_t);
  void (*cumsum_columns)(const T*, T*, int64_t, int64_t, int64_t, int64_t);
  void (*cumprod_columns)(const T*, T*, int64_t, int64_t, int64_t, int64_t);
};

// Entry points compiled for one instruction set (TARGET: a GCC target attribute or nothing);
// the always-inline templates above are compiled into each.
#define EMBER_REDUCE_VARIANT(NS, TARGET)                                                                        \
  namespace NS {                                                                                              \
  template <typename T>                                                                                       \
  TARGET AccOf<T> sum_contiguous_k(const T* x, int64_t n) {                                                   \
    return sum_contiguous<T>(x, n);                                                                           \
  }                                                                                                           \
  template <typename T>                                                                                       \
  TARGET void sum_rows_k(const T* x, int64_t n, int64_t r0, int64_t r1, T* out) {                             \
    sum_rows<T>(x, n, r0, r1, out);                                                                           \
  }                                                                                                           \
  template <typename T, typename Out>                                                                          \
  TARGET void sum_columns_k(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw, Out* out) {         \
    sum_columns<T, Out>(x, R, inner, c0, cw, out);                                                            \
  }                                                                                                           \
  template <typename T>                                                                                       \
  TARGET AccOf<T> acc_total_k(const T* x, int64_t n) {                                                        \
    return acc_total<T>(x, n);                                                                                \
  }                                                                                                           \
  template <typename T>                                                                                       \
  TARGET void cumsum_row_k(const T* x, T* y, int64_t n, AccOf<T> init) {                                      \
    scan_row<T, AddOp>(x, y, n, init);                                                                        \
  }                                                                                                           \
  template <typename T, typename Op>                                                                          \
  TARGET void scan_rows_k(const T* x, T* y, int64_t n, int64_t r0, int64_t r1) {                              \
    scan_rows<T, Op>(x, y, n, r0, r1);                                                                        \
  }                                                                                                           \
  template <typename T, typename Op>                                                                          \
  TARGET void scan_columns_k(const T* x, T* y, int64_t n, int64_t inner, int64_t c0, int64_t cw) {            \
    scan_columns<T, Op>(x, y, n, inner, c0, cw);                                                              \
  }                                                                                                           \
  template <typename T>                                                                                       \
  Kernels<T> table() {                                                                                        \
    return {&sum_contiguous_k<T>,       &sum_rows_k<T>,           &sum_columns_k<T, T>,                      \
            &sum_columns_k<T, AccOf<T>>, &acc_total_k<T>,          &cumsum_row_k<T>,                          \
            &scan_rows_k<T, AddOp>,     &scan_rows_k<T, MulOp>,   &scan_columns_k<T, AddOp>,                 \
            &scan_columns_k<T, MulOp>};                                                                       \
  }                                                                                                           \
  }

EMBER_REDUCE_VARIANT(baseline, )
#if defined(__x86_64__) || defined(__i386__)
EMBER_REDUCE_VARIANT(avx2, __attribute__((target("avx2"))))
#if defined(__clang__)
EMBER_REDUCE_VARIANT(avx512, __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw"))))
#else
EMBER_REDUCE_VARIANT(avx512, __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,prefer-vector-width=512"))))
#endif
#endif

// The instruction sets this file is compiled for, best first, and the one in use.
enum Isa { kAvx512 = 0, kAvx2 = 1, kBaseline = 2 };
constexpr const char* kIsaNames[] = {"avx512", "avx2", "baseline"};

bool isa_supported(int isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (isa == kAvx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw");
  if (isa == kAvx2) return __builtin_cpu_supports("avx2");
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

// Selects the instruction set by name ("avx512", "avx2", "baseline"; for tests); returns the previous one.
std::string set_reduce_isa(const std::string& name) {
  const std::string previous = kIsaNames[g_isa];
  for (int isa = kAvx512; isa <= kBaseline; ++isa) {
    if (name == kIsaNames[isa]) {
      if (!isa_supported(isa)) throw std::invalid_argument("set_reduce_isa: this CPU lacks " + name);
      g_isa = isa;
      return previous;
    }
  }
  throw std::invalid_argument("set_reduce_isa: unknown instruction set '" + name + "' (expected avx512, avx2 or baseline)");
}

std::vector<std::string> supported_reduce_isas() {
  std::vector<std::string> names;
  for (int isa = kAvx512; isa <= kBaseline; ++isa)
    if (isa_supported(isa)) names.push_back(kIsaNames[isa]);
  return names;
}

// ---- drivers: split the work over threads -------------------------------------------------

// [lo, hi) of n items for part `part` of `parts`.
inline void split(int64_t n, int64_t parts, int64_t part, int64_t& lo, int64_t& hi) {
  const int64_t base = n / parts, extra = n % parts;
  lo = part * base + std::min(part, extra);
  hi = lo + base + (part < extra ? 1 : 0);
}

template <typename T>
void sum_driver(const T* x, int64_t outer, int64_t R, int64_t inner, T* out) {
  const Kernels<T>& k = kernels<T>();
  const int64_t work = outer * R * inner;
  const int64_t threads = work > kParallelSum ? max_threads() : 1;
  if (outer * inner == 0) return;
  if (inner == 1) {
    if (outer >= 2 * threads || threads == 1) {
      const int64_t parts = std::min<int64_t>(threads, outer);
#pragma omp parallel for schedule(static) if (parts > 1)
      for (int64_t part = 0; part < parts; ++part) {
        int64_t lo, hi;
        split(outer, parts, part, lo, hi);
        k.sum_rows(x, R, lo, hi, out);
      }
      return;
    }
    // Few long rows: each row is cut into one piece per thread.
    std::vector<AccOf<T>> partial(threads);
    for (int64_t r = 0; r < outer; ++r) {
      const T* row = x + r * R;
#pragma omp parallel for schedule(static)
      for (int64_t part = 0; part < threads; ++part) {
        int64_t lo, hi;
        split(R, threads, part, lo, hi);
        partial[part] = k.sum_contiguous(row + lo, hi - lo);
      }
      AccOf<T> total = 0;
      for (int64_t part = 0; part < threads; ++part) total += partial[part];
      out[r] = static_cast<T>(total);
    }
    return;
  }
  const int64_t blocks = (inner + kColumns - 1) / kColumns;
  const int64_t tasks = outer * blocks;
  if (tasks < threads && R >= threads * kRowBlock) {
    // Too few column blocks to go round (e.g. x.sum(0) of a tall, narrow matrix): each thread sums
    // its share of the reduced rows into float64 partial sums, added up at the end.
    const int64_t size = outer * inner;
    std::vector<AccOf<T>> partial(threads * size);
#pragma omp parallel for schedule(static)
    for (int64_t part = 0; part < threads; ++part) {
      int64_t lo, hi;
      split(R, threads, part, lo, hi);
      for (int64_t t = 0; t < tasks; ++t) {
        const int64_t o = t / blocks, c0 = (t % blocks) * kColumns;
        k.sum_columns_partial(x + (o * R + lo) * inner, hi - lo, inner, c0, std::min(kColumns, inner - c0),
                              partial.data() + part * size + o * inner);
      }
    }
    for (int64_t i = 0; i < size; ++i) {
      AccOf<T> total = 0;
      for (int64_t part = 0; part < threads; ++part) total += partial[part * size + i];
      out[i] = static_cast<T>(total);
    }
    return;
  }
#pragma omp parallel for schedule(static) if (threads > 1 && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t o = t / blocks, c0 = (t % blocks) * kColumns;
    k.sum_columns(x + o * R * inner, R, inner, c0, std::min(kColumns, inner - c0), out + o * inner);
  }
}

template <typename T, bool kSum>
void scan_driver(const T* x, int64_t outer, int64_t n, int64_t inner, T* y) {
  const Kernels<T>& k = kernels<T>();
  const int64_t work = outer * n * inner;
  const int64_t threads = work > kParallelWork ? max_threads() : 1;
  if (work == 0) return;
  if (inner == 1) {
    if (kSum && outer < threads) {
      // One long row per pass: each thread scans its piece, starting from the total of the pieces before it.
      std::vector<AccOf<T>> offset(threads + 1);
      for (int64_t r = 0; r < outer; ++r) {
        const T* row = x + r * n;
        T* out = y + r * n;
#pragma omp parallel for schedule(static)
        for (int64_t part = 0; part < threads; ++part) {
          int64_t lo, hi;
          split(n, threads, part, lo, hi);
          offset[part + 1] = k.acc_total(row + lo, hi - lo);
        }
        offset[0] = 0;
        for (int64_t part = 0; part < threads; ++part) offset[part + 1] += offset[part];
#pragma omp parallel for schedule(static)
        for (int64_t part = 0; part < threads; ++part) {
          int64_t lo, hi;
          split(n, threads, part, lo, hi);
          k.cumsum_row(row + lo, out + lo, hi - lo, offset[part]);
        }
      }
      return;
    }
    const int64_t parts = std::min<int64_t>(threads, outer);
    // Whole groups of four rows per thread where there are enough rows (see scan_rows).
    const int64_t unit = outer >= 4 * parts ? 4 : 1;
    const int64_t units = (outer + unit - 1) / unit;
#pragma omp parallel for schedule(static) if (parts > 1)
    for (int64_t part = 0; part < parts; ++part) {
      int64_t lo, hi;
      split(units, parts, part, lo, hi);
      (kSum ? k.cumsum_rows : k.cumprod_rows)(x, y, n, lo * unit, std::min(outer, hi * unit));
    }
    return;
  }
  const int64_t blocks = (inner + kColumns - 1) / kColumns;
  const int64_t tasks = outer * blocks;
#pragma omp parallel for schedule(static) if (threads > 1 && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t o = t / blocks, c0 = (t % blocks) * kColumns;
    (kSum ? k.cumsum_columns : k.cumprod_columns)(x + o * n * inner, y + o * n * inner, n, inner, c0,
                                                    std::min(kColumns, inner - c0));
  }
}

// ---- Python entry points -----------------------------------------------------------------
// They take arrays of any shape and fold them to [outer, n, inner] themselves (cheaper than
// numpy reshapes on the Python side). They return None, rather than raise, for arrays that
// these kernels do not handle (other dtypes, not C-contiguous), so that the caller can fall
// back to numpy with one call.

enum class Kind { kFloat32, kFloat64, kInt64, kOther };

Kind kind_of(const py::array& x) {
  const py::dtype dt = x.dtype();
  if (dt.is(py::dtype::of<float>())) return Kind::kFloat32;
  if (dt.is(py::dtype::of<double>())) return Kind::kFloat64;
  if (dt.is(py::dtype::of<int64_t>())) return Kind::kInt64;
  return Kind::kOther;
}

bool usable(const py::array& x) { return (x.flags() & py::array::c_style) && kind_of(x) != Kind::kOther; }

void check_dims(const py::array& x, int64_t first, int64_t last, const char* what) {
  const int64_t ndim = x.ndim();
  if (first < 0 || last < first || last >= ndim)
    throw std::invalid_argument(std::string(what) + ": dims " + std::to_string(first) + ".." + std::to_string(last) +
                                " out of range for an array of " + std::to_string(ndim) + " dims");
}

// outer, n, inner: the element counts of x's dims before first, first..last, and after last.
void fold(const py::array& x, int64_t first, int64_t last, int64_t& outer, int64_t& n, int64_t& inner) {
  outer = n = inner = 1;
  for (int64_t d = 0; d < x.ndim(); ++d) (d < first ? outer : d <= last ? n : inner) *= x.shape(d);
}

template <typename T>
py::array sum_typed(const py::array& x, int64_t first, int64_t last, bool keepdim) {
  int64_t outer, R, inner;
  fold(x, first, last, outer, R, inner);
  std::vector<py::ssize_t> shape;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (d < first || d > last)
      shape.push_back(x.shape(d));
    else if (keepdim)
      shape.push_back(1);
  }
  py::array_t<T> out(shape);
  const T* in = static_cast<const T*>(x.data());
  T* o = out.mutable_data();
  {
    py::gil_scoped_release release;
    if (R == 0)
      std::fill(o, o + outer * inner, T(0));
    else
      sum_driver<T>(in, outer, R, inner, o);
  }
  return std::move(out);
}

py::object sum_dims(const py::array& x, int64_t first, int64_t last, bool keepdim) {
  check_dims(x, first, last, "sum_dims");
  if (!usable(x)) return py::none();
  switch (kind_of(x)) {
    case Kind::kFloat32:
      return sum_typed<float>(x, first, last, keepdim);
    case Kind::kFloat64:
      return sum_typed<double>(x, first, last, keepdim);
    default:
      return sum_typed<int64_t>(x, first, last, keepdim);
  }
}

template <typename T, bool kSum>
py::array scan_typed(const py::array& x, int64_t dim) {
  int64_t outer, n, inner;
  fold(x, dim, dim, outer, n, inner);
  py::array_t<T> out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  const T* in = static_cast<const T*>(x.data());
  T* o = out.mutable_data();
  {
    py::gil_scoped_release release;
    scan_driver<T, kSum>(in, outer, n, inner, o);
  }
  return std::move(out);
}

template <bool kSum>
py::object scan(const py::array& x, int64_t dim) {
  check_dims(x, dim, dim, kSum ? "cumsum" : "cumprod");
  if (!usable(x)) return py::none();
  switch (kind_of(x)) {
    case Kind::kFloat32:
      return scan_typed<float, kSum>(x, dim);
    case Kind::kFloat64:
      return scan_typed<double, kSum>(x, dim);
    default:
      return scan_typed<int64_t, kSum>(x, dim);
  }
}

}  // namespace

void init_reduce(py::module_& m) {
  m.def("sum_dims", &sum_dims, py::arg("x"), py::arg("first"), py::arg("last"), py::arg("keepdim") = false,
        "Sum of a C-contiguous float32/float64/int64 array over its adjacent dims first..last (a new array; the "
        "summed dims dropped, or kept with size 1). None for other dtypes or non-contiguous arrays. Floats: blocked "
        "pairwise summation with float64 block accumulators; int64 wraps around.");
  m.def("cumsum", &scan<true>, py::arg("x"), py::arg("dim"),
        "Cumulative sum along dim of a C-contiguous float32/float64/int64 array (a new array). None for other "
        "dtypes or non-contiguous arrays. Floats accumulate in float64; int64 wraps around.");
  m.def("cumprod", &scan<false>, py::arg("x"), py::arg("dim"),
        "Cumulative product along dim of a C-contiguous float32/float64/int64 array (a new array). None for other "
        "dtypes or non-contiguous arrays. Floats accumulate in float64; int64 wraps around.");
  m.def("set_reduce_isa", &set_reduce_isa, py::arg("name"),
        "Use the sum/cumsum/cumprod kernels compiled for this instruction set (for tests); returns the previous one.");
  m.def("supported_reduce_isas", &supported_reduce_isas,
        "The instruction sets of the sum/cumsum/cumprod kernels that this CPU can run, best first.");
}
