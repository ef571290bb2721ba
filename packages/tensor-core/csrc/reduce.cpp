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
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
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
// Steps of 2 vectors per block of the grouped row sums (sum_row_group).
constexpr int kGroupSteps = 16;
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

// The grouped row sums below use 32-byte vectors: with 64-byte ones under AVX2, GCC keeps the
// accumulators of four rows on the stack.
template <typename T>
constexpr int kHalf = 32 / sizeof(T);  // elements in one H
template <typename T>
using HVecOf = typename VecN<LaneOf<T>, kHalf<T>>::type;
template <typename T>
using HAccOf = typename VecN<AccOf<T>, kHalf<T>>::type;

template <typename T>
EMBER_ALWAYS_INLINE HVecOf<T> load_half(const T* p) {
  HVecOf<T> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// lanes[g] = the sum of the steps of 2 vectors of row g over elements [i, end) (whole steps), for
// G <= 4 rows of n elements from x. Named locals rather than an array: GCC keeps those in registers.
template <typename T, int G>
EMBER_ALWAYS_INLINE void group_steps(const T* x, int64_t n, int64_t i, int64_t end, HVecOf<T>* lanes) {
  static_assert(G == 1 || G == 4, "rows are summed alone or four at a time");
  constexpr int H = kHalf<T>;
  HVecOf<T> a = {}, b = {}, c = {}, d = {};
  // (Unrolled fully, GCC would regroup the steps row by row: one long dependency chain per row.)
#pragma GCC unroll 2
  for (; i < end; i += 2 * H) {
    const T* p = x + i;
    a += load_half(p) + load_half(p + H);
    if constexpr (G == 4) {
      b += load_half(p + n) + load_half(p + n + H);
      c += load_half(p + 2 * n) + load_half(p + 2 * n + H);
      d += load_half(p + 3 * n) + load_half(p + 3 * n + H);
    }
  }
  lanes[0] = a;
  if constexpr (G == 4) {
    lanes[1] = b;
    lanes[2] = c;
    lanes[3] = d;
  }
}

// out[g] = sum of the G rows x[g * n .. (g + 1) * n), n >= kHalf, read side by side: G streams keep
// more loads from memory in flight than one (a 4096 x 4096 float32 x.sum(1) takes about 0.75x the
// time of one row after the other on AVX2). Each row is summed the same way for any G, so the
// grouping (which depends on how the rows are split over threads) does not change any bits. Per
// row: steps of 2 vectors, added together and then to the row's lanes (in the input's type); every
// kGroupSteps steps the lanes go to float64 accumulators, flushed every kFlush blocks into others,
// as in sum_contiguous (the same blocked pairwise summation, with blocks of 2 * kGroupSteps vectors).
template <typename T, int G>
EMBER_ALWAYS_INLINE void sum_row_group(const T* x, int64_t n, T* out) {
  using V = HVecOf<T>;
  using A = HAccOf<T>;
  using Lane = LaneOf<T>;
  constexpr int H = kHalf<T>;
  constexpr int64_t step = 2 * H, block = kGroupSteps * step;
  V lanes[G];
  A mid[G] = {}, top[G] = {};
  int64_t i = 0;
  int filled = 0;
  for (; i + block <= n; i += block) {
    group_steps<T, G>(x, n, i, i + block, lanes);
    for (int g = 0; g < G; ++g) mid[g] += __builtin_convertvector(lanes[g], A);
    if (++filled == kFlush) {
      for (int g = 0; g < G; ++g) {
        top[g] += mid[g];
        mid[g] = A{};
      }
      filled = 0;
    }
  }
  // The last partial block: whole steps, one vector, and the last elements as the end of the vector
  // that ends the row, its lanes already counted zeroed.
  const int64_t steps_end = i + (n - i) / step * step;
  group_steps<T, G>(x, n, i, steps_end, lanes);
  i = steps_end;
  if (i + H <= n) {
    for (int g = 0; g < G; ++g) lanes[g] += load_half(x + g * n + i);
    i += H;
  }
  if (i < n) {
    using Mask = typename VecN<std::conditional_t<sizeof(T) == 4, int32_t, int64_t>, H>::type;
    Mask lane = {};
    for (int j = 0; j < H; ++j) lane[j] = j;
    const Mask keep = lane >= static_cast<std::remove_reference_t<decltype(lane[0])>>(H - (n - i));
    for (int g = 0; g < G; ++g) lanes[g] += keep ? load_half(x + g * n + n - H) : V{};
  }
  for (int g = 0; g < G; ++g) {
    if (n < block)
      out[g] = static_cast<T>(horizontal_sum<Lane, H>(lanes[g]));
    else
      out[g] = static_cast<T>(horizontal_sum<AccOf<T>, H>((top[g] + mid[g]) + __builtin_convertvector(lanes[g], A)));
  }
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
  for (; r + 4 <= r1; r += 4) sum_row_group<T, 4>(x + r * n, n, out + r);
  for (; r < r1; ++r) sum_row_group<T, 1>(x + r * n, n, out + r);
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

// ---- extrema, arg-extrema and moments -----------------------------------------------------
// amax/amin (and the inf-norms, as the extrema of |x|), argmax/argmin with their values, and
// sums of a map of each element: x (for means), |x| (1-norm), x^2 (2-norm) and, for var/std,
// the deviations d = x - mean and d^2 (two passes: the means first). They share the
// [outer, n, inner] folding of sum, and one driver (reduce_driver) that splits the work the
// way sum_driver does.
//
// * Extrema are exact, so any order gives the same bits; a NaN anywhere makes the result NaN.
// * Arg-extrema return the first index of the extreme value, or of the first NaN. The pieces
//   of a row split over threads are merged in order (a later piece wins only when strictly
//   better), so the index does not depend on the thread count either.
// * Moments accumulate in float64 (float32 input included): lanes of a 64-element block add
//   up in a block accumulator, blocks into a total (error ~ (64 + n/64) eps of float64 for
//   float64 input; float32 results are exact to within their final rounding in practice).
//   var = (sum d^2 - (sum d)^2 / n) / max(0, n - correction), the "corrected two-pass"
//   formula (Chan, Golub, LeVeque, "Algorithms for computing the sample variance", 1983): the
//   second term removes most of the error of the rounded mean.

// These kernels use 32-byte vectors: GCC 12 turns comparisons of vectors wider than the target's
// registers (64 bytes under AVX2) into scalar code.
template <typename T>
constexpr int kW = 32 / sizeof(T);
template <typename T>
using Vec = typename VecN<T, kW<T>>::type;
template <typename T>
using IntOf = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
template <typename T>
using MaskVec = typename VecN<IntOf<T>, kW<T>>::type;
template <typename T>
using WideVec = typename VecN<double, kW<T>>::type;  // the lanes of a Vec<T>, as float64

template <typename V, typename T>
EMBER_ALWAYS_INLINE V loadv(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <typename T>
EMBER_ALWAYS_INLINE WideVec<T> widen_v(const Vec<T>& v) {
  return __builtin_convertvector(v, WideVec<T>);
}

template <typename M>
EMBER_ALWAYS_INLINE bool any_lane(const M& m) {
  constexpr int n = sizeof(M) / sizeof(m[0]);
  bool any = false;
  for (int l = 0; l < n; ++l) any |= m[l] != 0;
  return any;
}

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

template <typename T>
EMBER_ALWAYS_INLINE bool is_nan(T v) {
  if constexpr (kIsFloat<T>) return v != v;
  return false;
}

// |v| by clearing the sign bit (so that -0.0 gives +0.0); v itself for kAbs false.
template <typename T, bool kAbs>
EMBER_ALWAYS_INLINE Vec<T> magnitude_v(const Vec<T>& v) {
  if constexpr (kAbs && kIsFloat<T>) {
    using M = MaskVec<T>;
    constexpr IntOf<T> kNoSign = std::numeric_limits<IntOf<T>>::max();
    return (Vec<T>)((M)v & kNoSign);
  }
  return v;
}

template <typename T, bool kAbs>
EMBER_ALWAYS_INLINE T magnitude(T v) {
  if constexpr (kAbs && kIsFloat<T>) return std::fabs(v);
  return v;
}

// m ? a : b lane by lane, as bit operations (for masks computed apart from the values).
template <typename M, typename X>
EMBER_ALWAYS_INLINE X blend(const M& m, const X& a, const X& b) {
  return (X)(((M)a & m) | ((M)b & ~m));
}

// The better of a and v (v only if strictly better); NaNs are tracked apart.
template <bool kMax, typename X>
EMBER_ALWAYS_INLINE X pick(const X& a, const X& v) {
  // (On 32-byte vectors under AVX2 this is one vmaxps/vminps for floats.)
  if constexpr (kMax)
    return v > a ? v : a;
  else
    return v < a ? v : a;
}

template <typename T>
EMBER_ALWAYS_INLINE T quiet_nan() {
  if constexpr (kIsFloat<T>) return std::numeric_limits<T>::quiet_NaN();
  return T(0);
}

// The extreme of n >= 1 contiguous elements (of |x| for kAbs).
template <typename T, bool kMax, bool kAbs>
EMBER_ALWAYS_INLINE T extreme_contiguous(const T* x, int64_t n) {
  using V = Vec<T>;
  using M = MaskVec<T>;
  constexpr int W = kW<T>;
  if (n < 4 * W) {
    T best = magnitude<T, kAbs>(x[0]);
    bool nan = is_nan(best);
    for (int64_t i = 1; i < n; ++i) {
      const T v = magnitude<T, kAbs>(x[i]);
      nan |= is_nan(v);
      best = pick<kMax>(best, v);
    }
    return nan ? quiet_nan<T>() : best;
  }
  V a0 = magnitude_v<T, kAbs>(loadv<V>(x)), a1 = magnitude_v<T, kAbs>(loadv<V>(x + W));
  V a2 = magnitude_v<T, kAbs>(loadv<V>(x + 2 * W)), a3 = magnitude_v<T, kAbs>(loadv<V>(x + 3 * W));
  M nan = {};
  if constexpr (kIsFloat<T>) nan = (a0 != a0) | (a1 != a1) | (a2 != a2) | (a3 != a3);
  int64_t i = 4 * W;
  for (; i + 4 * W <= n; i += 4 * W) {
    const V v0 = magnitude_v<T, kAbs>(loadv<V>(x + i)), v1 = magnitude_v<T, kAbs>(loadv<V>(x + i + W));
    const V v2 = magnitude_v<T, kAbs>(loadv<V>(x + i + 2 * W)), v3 = magnitude_v<T, kAbs>(loadv<V>(x + i + 3 * W));
    if constexpr (kIsFloat<T>) nan |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3);
    a0 = pick<kMax>(a0, v0);
    a1 = pick<kMax>(a1, v1);
    a2 = pick<kMax>(a2, v2);
    a3 = pick<kMax>(a3, v3);
  }
  // The rest as whole vectors, then the vector that ends the row (overlap is harmless: extrema are idempotent).
  for (; i + W <= n; i += W) {
    const V v = magnitude_v<T, kAbs>(loadv<V>(x + i));
    if constexpr (kIsFloat<T>) nan |= v != v;
    a0 = pick<kMax>(a0, v);
  }
  if (i < n) {
    const V v = magnitude_v<T, kAbs>(loadv<V>(x + n - W));
    if constexpr (kIsFloat<T>) nan |= v != v;
    a1 = pick<kMax>(a1, v);
  }
  if (any_lane(nan)) return quiet_nan<T>();
  const V a = pick<kMax>(pick<kMax>(a0, a1), pick<kMax>(a2, a3));
  T best = a[0];
  for (int l = 1; l < W; ++l) best = pick<kMax>(best, a[l]);
  return best;
}

// Offsets of the column vectors of columns [c0, c0 + cw) (cw <= kColumns, inner >= W): whole
// vectors, and one that ends at the last column (overlapping the one before it). Returns their count.
template <typename T>
EMBER_ALWAYS_INLINE int64_t column_offsets(int64_t c0, int64_t cw, int64_t* offset) {
  constexpr int W = kW<T>;
  const int64_t full = cw / W, nv = full + (cw % W ? 1 : 0);
  for (int64_t v = 0; v < nv; ++v) offset[v] = v < full ? c0 + v * W : c0 + cw - W;
  return nv;
}

constexpr int64_t kMaxColumnVectors = kColumns / kW<double> + 1;  // enough for the narrowest vectors (of 8-byte elements)

// out[c0 + j] = the extreme over r of x[r, c0 + j], j < cw, for x [R, inner], R >= 1.
template <typename T, bool kMax, bool kAbs>
EMBER_ALWAYS_INLINE void extreme_columns(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw, T* out) {
  using V = Vec<T>;
  using M = MaskVec<T>;
  if (inner < kW<T>) {
    for (int64_t j = c0; j < c0 + cw; ++j) {
      T best = magnitude<T, kAbs>(x[j]);
      bool nan = is_nan(best);
      for (int64_t r = 1; r < R; ++r) {
        const T v = magnitude<T, kAbs>(x[r * inner + j]);
        nan |= is_nan(v);
        best = pick<kMax>(best, v);
      }
      out[j] = nan ? quiet_nan<T>() : best;
    }
    return;
  }
  int64_t offset[kMaxColumnVectors];
  V acc[kMaxColumnVectors];
  M nan[kMaxColumnVectors];
  const int64_t nv = column_offsets<T>(c0, cw, offset);
  for (int64_t v = 0; v < nv; ++v) {
    acc[v] = magnitude_v<T, kAbs>(loadv<V>(x + offset[v]));
    nan[v] = M{};
  }
  for (int64_t r = 1; r < R; ++r) {
    const T* row = x + r * inner;
    for (int64_t v = 0; v < nv; ++v) {
      const V val = magnitude_v<T, kAbs>(loadv<V>(row + offset[v]));
      if constexpr (kIsFloat<T>) nan[v] |= val != val;
      acc[v] = pick<kMax>(acc[v], val);
    }
  }
  if constexpr (kIsFloat<T>) {
    for (int64_t v = 0; v < nv; ++v)
      for (int l = 0; l < kW<T>; ++l)
        if (nan[v][l]) acc[v][l] = quiet_nan<T>();
  }
  for (int64_t v = 0; v < nv; ++v) std::memcpy(out + offset[v], &acc[v], sizeof(V));
}

// A value and the index where it first occurs (what argmax/argmin and max/min(dim) produce).
template <typename T>
struct ValueIndex {
  T value;
  int64_t index;
};

// Whether v beats the current best a: strictly better, or the first NaN.
template <typename T, bool kMax>
EMBER_ALWAYS_INLINE bool beats(T v, T a) {
  if constexpr (kIsFloat<T>) {
    if (a != a) return false;
    if (v != v) return true;
  }
  return kMax ? v > a : v < a;
}

// The extreme of n >= 1 contiguous elements and its first index (the first NaN if any).
template <typename T, bool kMax>
EMBER_ALWAYS_INLINE ValueIndex<T> arg_contiguous(const T* x, int64_t n) {
  using V = Vec<T>;
  using M = MaskVec<T>;
  constexpr int W = kW<T>;
  if (n < 8 * W) {
    ValueIndex<T> best{x[0], 0};
    for (int64_t i = 1; i < n && !is_nan(best.value); ++i)
      if (beats<T, kMax>(x[i], best.value)) best = {x[i], i};
    return best;
  }
  // Long rows: the extreme first (vectorised), then the first place where it occurs.
  const T value = extreme_contiguous<T, kMax, false>(x, n);
  const bool nan = is_nan(value);
  const V target = V{} + value;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const V v = loadv<V>(x + i);
    const M hit = nan ? M(v != v) : M(v == target);
    if (any_lane(hit))
      for (int l = 0; l < W; ++l)
        if (hit[l]) return {value, i + l};
  }
  for (; i < n; ++i)
    if (nan ? is_nan(x[i]) : x[i] == value) break;
  return {value, i};
}

// out[c0 + j] = (extreme, first index) over r of x[r, c0 + j], j < cw, for x [R, inner]; R >= 1
// and, for 4-byte elements, R < 2^31 (the indices ride in lanes as wide as the elements).
template <typename T, bool kMax>
EMBER_ALWAYS_INLINE void arg_columns(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw,
                                     ValueIndex<T>* out) {
  using V = Vec<T>;
  using M = MaskVec<T>;
  using I = IntOf<T>;
  if (inner < kW<T>) {
    for (int64_t j = c0; j < c0 + cw; ++j) {
      ValueIndex<T> best{x[j], 0};
      for (int64_t r = 1; r < R && !is_nan(best.value); ++r)
        if (beats<T, kMax>(x[r * inner + j], best.value)) best = {x[r * inner + j], r};
      out[j] = best;
    }
    return;
  }
  int64_t offset[kMaxColumnVectors];
  V best[kMaxColumnVectors];
  M index[kMaxColumnVectors];
  const int64_t nv = column_offsets<T>(c0, cw, offset);
  for (int64_t v = 0; v < nv; ++v) {
    best[v] = loadv<V>(x + offset[v]);
    index[v] = M{};
  }
  for (int64_t r = 1; r < R; ++r) {
    const T* row = x + r * inner;
    const M here = M{} + I(r);
    for (int64_t v = 0; v < nv; ++v) {
      const V val = loadv<V>(row + offset[v]);
      M take = kMax ? M(val > best[v]) : M(val < best[v]);
      if constexpr (kIsFloat<T>) take |= M(val != val) & M(best[v] == best[v]);
      best[v] = blend(take, val, best[v]);
      index[v] = blend(take, here, index[v]);
    }
  }
  for (int64_t v = 0; v < nv; ++v)
    for (int l = 0; l < kW<T>; ++l) out[offset[v] + l] = {best[v][l], int64_t(index[v][l])};
}

// Sums of a map of each element, in float64: s1 and s2 (what each map fills is listed below).
struct Moments {
  double s1, s2;
};

enum MapKind {
  kMapLinear = 0,  // s1 = sum x
  kMapAbs = 1,     // s1 = sum |x|
  kMapSquare = 2,  // s2 = sum x^2
  kMapDev = 3,     // d = x - center: s1 = sum d, s2 = sum d^2
};

template <int kMap, typename X>
EMBER_ALWAYS_INLINE void accumulate(const X& x, const X& center, X& s1, X& s2) {
  if constexpr (kMap == kMapLinear) {
    s1 += x;
  } else if constexpr (kMap == kMapAbs) {
    if constexpr (std::is_arithmetic_v<X>) {
      s1 += std::fabs(x);
    } else {
      using M = decltype(x < x);  // int64 lanes: clear the sign bits
      s1 += (X)((M)x & std::numeric_limits<int64_t>::max());
    }
  } else if constexpr (kMap == kMapSquare) {
    s2 += x * x;
  } else {
    const X d = x - center;
    s1 += d;
    s2 += d * d;
  }
}

constexpr int64_t kMomentBlock = 64;  // elements (rows for columns) per block accumulator

// Moments of n contiguous elements about center.
template <typename T, int kMap>
EMBER_ALWAYS_INLINE Moments moments_contiguous(const T* x, int64_t n, double center) {
  using V = Vec<T>;
  using A = WideVec<T>;
  constexpr int W = kW<T>;
  constexpr int64_t block = kMomentBlock * W;
  const A c = A{} + center;
  A t1 = {}, t2 = {};
  int64_t i = 0;
  while (i + 2 * W <= n) {
    A a1 = {}, a2 = {}, b1 = {}, b2 = {};
    const int64_t end = std::min(n, i + block);
    for (; i + 2 * W <= end; i += 2 * W) {
      accumulate<kMap>(widen_v<T>(loadv<V>(x + i)), c, a1, a2);
      accumulate<kMap>(widen_v<T>(loadv<V>(x + i + W)), c, b1, b2);
    }
    t1 += a1 + b1;
    t2 += a2 + b2;
  }
  double s1 = horizontal_sum<double, W>(t1), s2 = horizontal_sum<double, W>(t2);
  for (; i < n; ++i) accumulate<kMap>(double(x[i]), center, s1, s2);
  return {s1, s2};
}

// out[c0 + j] = moments over r of x[r, c0 + j] about center[c0 + j], j < cw, for x [R, inner].
template <typename T, int kMap>
EMBER_ALWAYS_INLINE void moments_columns(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw,
                                         const double* center, Moments* out) {
  using V = Vec<T>;
  using A = WideVec<T>;
  if (inner < kW<T>) {
    for (int64_t j = c0; j < c0 + cw; ++j) {
      const double c = kMap == kMapDev ? center[j] : 0.0;
      double s1 = 0, s2 = 0;
      for (int64_t r = 0; r < R; ++r) accumulate<kMap>(double(x[r * inner + j]), c, s1, s2);
      out[j] = {s1, s2};
    }
    return;
  }
  int64_t offset[kMaxColumnVectors];
  A c[kMaxColumnVectors], t1[kMaxColumnVectors], t2[kMaxColumnVectors];
  A a1[kMaxColumnVectors], a2[kMaxColumnVectors];
  const int64_t nv = column_offsets<T>(c0, cw, offset);
  for (int64_t v = 0; v < nv; ++v) {
    c[v] = kMap == kMapDev ? loadv<A>(center + offset[v]) : A{};
    t1[v] = t2[v] = A{};
  }
  for (int64_t r0 = 0; r0 < R; r0 += kMomentBlock) {
    const int64_t r1 = std::min(R, r0 + kMomentBlock);
    for (int64_t v = 0; v < nv; ++v) a1[v] = a2[v] = A{};
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * inner;
      for (int64_t v = 0; v < nv; ++v) accumulate<kMap>(widen_v<T>(loadv<V>(row + offset[v])), c[v], a1[v], a2[v]);
    }
    for (int64_t v = 0; v < nv; ++v) {
      t1[v] += a1[v];
      t2[v] += a2[v];
    }
  }
  for (int64_t v = 0; v < nv; ++v)
    for (int l = 0; l < kW<T>; ++l) out[offset[v] + l] = {t1[v][l], t2[v][l]};
}

// Kinds of extreme: max, min, max |x|, min |x|.
enum ExtremeKind { kExtMax = 0, kExtMin = 1, kExtAbsMax = 2, kExtAbsMin = 3 };

template <typename T>
struct StatKernels {
  // Rows r0..r1 of x (row r at x + r * stride, n elements): out[r - r0].
  void (*extreme_rows)(const T*, int64_t, int64_t, int64_t, int64_t, T*, int);
  void (*extreme_columns)(const T*, int64_t, int64_t, int64_t, int64_t, T*, int);
  void (*arg_rows)(const T*, int64_t, int64_t, int64_t, int64_t, ValueIndex<T>*, bool);
  void (*arg_columns)(const T*, int64_t, int64_t, int64_t, int64_t, ValueIndex<T>*, bool);
  // Floats only (null for integers). center: one per row, or per column (offset like out).
  void (*moments_rows)(const T*, int64_t, int64_t, int64_t, int64_t, const double*, Moments*, int);
  void (*moments_columns)(const T*, int64_t, int64_t, int64_t, int64_t, const double*, Moments*, int);
};

#define EMBER_STATS_VARIANT(NS, TARGET)                                                                       \
  namespace NS {                                                                                            \
  template <typename T, bool kMax, bool kAbs>                                                               \
  TARGET void extreme_rows_t(const T* x, int64_t stride, int64_t n, int64_t r0, int64_t r1, T* out) {       \
    for (int64_t r = r0; r < r1; ++r) out[r - r0] = extreme_contiguous<T, kMax, kAbs>(x + r * stride, n);   \
  }                                                                                                         \
  template <typename T>                                                                                     \
  void extreme_rows_k(const T* x, int64_t stride, int64_t n, int64_t r0, int64_t r1, T* out, int kind) {    \
    switch (kind) {                                                                                         \
      case kExtMax: return extreme_rows_t<T, true, false>(x, stride, n, r0, r1, out);                       \
      case kExtMin: return extreme_rows_t<T, false, false>(x, stride, n, r0, r1, out);                      \
      case kExtAbsMax: return extreme_rows_t<T, true, true>(x, stride, n, r0, r1, out);                     \
      default: return extreme_rows_t<T, false, true>(x, stride, n, r0, r1, out);                            \
    }                                                                                                       \
  }                                                                                                         \
  template <typename T, bool kMax, bool kAbs>                                                               \
  TARGET void extreme_columns_t(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw, T* out) {     \
    extreme_columns<T, kMax, kAbs>(x, R, inner, c0, cw, out);                                               \
  }                                                                                                         \
  template <typename T>                                                                                     \
  void extreme_columns_k(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw, T* out, int kind) {  \
    switch (kind) {                                                                                         \
      case kExtMax: return extreme_columns_t<T, true, false>(x, R, inner, c0, cw, out);                     \
      case kExtMin: return extreme_columns_t<T, false, false>(x, R, inner, c0, cw, out);                    \
      case kExtAbsMax: return extreme_columns_t<T, true, true>(x, R, inner, c0, cw, out);                   \
      default: return extreme_columns_t<T, false, true>(x, R, inner, c0, cw, out);                          \
    }                                                                                                       \
  }                                                                                                         \
  template <typename T, bool kMax>                                                                          \
  TARGET void arg_rows_t(const T* x, int64_t stride, int64_t n, int64_t r0, int64_t r1, ValueIndex<T>* out) { \
    for (int64_t r = r0; r < r1; ++r) out[r - r0] = arg_contiguous<T, kMax>(x + r * stride, n);             \
  }                                                                                                         \
  template <typename T>                                                                                     \
  void arg_rows_k(const T* x, int64_t stride, int64_t n, int64_t r0, int64_t r1, ValueIndex<T>* out,        \
                  bool is_max) {                                                                            \
    (is_max ? arg_rows_t<T, true> : arg_rows_t<T, false>)(x, stride, n, r0, r1, out);                      \
  }                                                                                                         \
  template <typename T, bool kMax>                                                                          \
  TARGET void arg_columns_t(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw, ValueIndex<T>* out) { \
    arg_columns<T, kMax>(x, R, inner, c0, cw, out);                                                         \
  }                                                                                                         \
  template <typename T>                                                                                     \
  void arg_columns_k(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw, ValueIndex<T>* out,      \
                     bool is_max) {                                                                         \
    (is_max ? arg_columns_t<T, true> : arg_columns_t<T, false>)(x, R, inner, c0, cw, out);                 \
  }                                                                                                         \
  template <typename T, int kMap>                                                                           \
  TARGET void moments_rows_t(const T* x, int64_t stride, int64_t n, int64_t r0, int64_t r1,                 \
                             const double* center, Moments* out) {                                          \
    for (int64_t r = r0; r < r1; ++r)                                                                       \
      out[r - r0] = moments_contiguous<T, kMap>(x + r * stride, n, kMap == kMapDev ? center[r - r0] : 0.0); \
  }                                                                                                         \
  template <typename T>                                                                                     \
  void moments_rows_k(const T* x, int64_t stride, int64_t n, int64_t r0, int64_t r1, const double* center,  \
                      Moments* out, int map) {                                                              \
    switch (map) {                                                                                          \
      case kMapLinear: return moments_rows_t<T, kMapLinear>(x, stride, n, r0, r1, center, out);            \
      case kMapAbs: return moments_rows_t<T, kMapAbs>(x, stride, n, r0, r1, center, out);                  \
      case kMapSquare: return moments_rows_t<T, kMapSquare>(x, stride, n, r0, r1, center, out);            \
      default: return moments_rows_t<T, kMapDev>(x, stride, n, r0, r1, center, out);                       \
    }                                                                                                       \
  }                                                                                                         \
  template <typename T, int kMap>                                                                           \
  TARGET void moments_columns_t(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw,               \
                                const double* center, Moments* out) {                                       \
    moments_columns<T, kMap>(x, R, inner, c0, cw, center, out);                                             \
  }                                                                                                         \
  template <typename T>                                                                                     \
  void moments_columns_k(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw, const double* center, \
                         Moments* out, int map) {                                                           \
    switch (map) {                                                                                          \
      case kMapLinear: return moments_columns_t<T, kMapLinear>(x, R, inner, c0, cw, center, out);          \
      case kMapAbs: return moments_columns_t<T, kMapAbs>(x, R, inner, c0, cw, center, out);                \
      case kMapSquare: return moments_columns_t<T, kMapSquare>(x, R, inner, c0, cw, center, out);          \
      default: return moments_columns_t<T, kMapDev>(x, R, inner, c0, cw, center, out);                     \
    }                                                                                                       \
  }                                                                                                         \
  template <typename T>                                                                                     \
  StatKernels<T> stat_table() {                                                                             \
    StatKernels<T> k{&extreme_rows_k<T>, &extreme_columns_k<T>, &arg_rows_k<T>, &arg_columns_k<T>,          \
                     nullptr, nullptr};                                                                     \
    if constexpr (kIsFloat<T>) {                                                                            \
      k.moments_rows = &moments_rows_k<T>;                                                                  \
      k.moments_columns = &moments_columns_k<T>;                                                            \
    }                                                                                                       \
    return k;                                                                                               \
  }                                                                                                         \
  }

EMBER_STATS_VARIANT(stats_baseline, )
#if defined(__x86_64__) || defined(__i386__)
EMBER_STATS_VARIANT(stats_avx2, __attribute__((target("avx2"))))
#if defined(__clang__)
EMBER_STATS_VARIANT(stats_avx512, __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw"))))
#else
EMBER_STATS_VARIANT(stats_avx512, __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,prefer-vector-width=512"))))
#endif
#endif

template <typename T>
const StatKernels<T>& stat_kernels() {
  static const StatKernels<T> tables[] = {
#if defined(__x86_64__) || defined(__i386__)
      stats_avx512::stat_table<T>(), stats_avx2::stat_table<T>(),
#else
      stats_baseline::stat_table<T>(), stats_baseline::stat_table<T>(),
#endif
      stats_baseline::stat_table<T>()};
  return tables[g_isa];
}

// Runs a reduction of x [outer, R, inner] (R >= 1) into out[outer * inner] of Part, over threads.
// rows(o0, o1, lo, hi, dst): elements [lo, hi) of rows o0..o1 (inner == 1) into dst[0 .. o1 - o0).
// columns(o, lo, hi, c0, cw, dst): rows [lo, hi) of outer index o, columns [c0, c0 + cw), into
// dst[c0 ..] (dst already offset by o * inner). merge(acc, part, lo): folds in the result of a
// later piece that started at lo; pieces are merged in order, so the result depends on the
// thread count only through where the pieces are cut (not at all for extrema).
template <typename Part, typename Rows, typename Columns, typename Merge>
void reduce_driver(int64_t outer, int64_t R, int64_t inner, Part* out, Rows rows, Columns columns, Merge merge) {
  const int64_t work = outer * R * inner;
  const int64_t threads = work > kParallelWork ? max_threads() : 1;
  if (outer * inner == 0) return;
  if (inner == 1) {
    if (outer >= 2 * threads || threads == 1 || R < threads * 1024) {
      const int64_t parts = std::min<int64_t>(threads, outer);
#pragma omp parallel for schedule(static) if (parts > 1)
      for (int64_t part = 0; part < parts; ++part) {
        int64_t lo, hi;
        split(outer, parts, part, lo, hi);
        rows(lo, hi, 0, R, out + lo);
      }
      return;
    }
    // Few long rows: each is cut into one piece per thread.
    std::vector<Part> partial(threads);
    for (int64_t r = 0; r < outer; ++r) {
#pragma omp parallel for schedule(static)
      for (int64_t part = 0; part < threads; ++part) {
        int64_t lo, hi;
        split(R, threads, part, lo, hi);
        rows(r, r + 1, lo, hi, &partial[part]);
      }
      out[r] = partial[0];
      for (int64_t part = 1; part < threads; ++part) {
        int64_t lo, hi;
        split(R, threads, part, lo, hi);
        merge(out[r], partial[part], lo);
      }
    }
    return;
  }
  const int64_t blocks = (inner + kColumns - 1) / kColumns;
  const int64_t tasks = outer * blocks;
  if (tasks < threads && R >= threads * kMomentBlock) {
    // Too few column blocks to go round: each thread takes a share of the reduced rows.
    const int64_t size = outer * inner;
    std::vector<Part> partial((threads - 1) * size);
#pragma omp parallel for schedule(static)
    for (int64_t part = 0; part < threads; ++part) {
      int64_t lo, hi;
      split(R, threads, part, lo, hi);
      Part* dst = part == 0 ? out : partial.data() + (part - 1) * size;
      for (int64_t t = 0; t < tasks; ++t) {
        const int64_t o = t / blocks, c0 = (t % blocks) * kColumns;
        columns(o, lo, hi, c0, std::min(kColumns, inner - c0), dst + o * inner);
      }
    }
    for (int64_t part = 1; part < threads; ++part) {
      int64_t lo, hi;
      split(R, threads, part, lo, hi);
      const Part* src = partial.data() + (part - 1) * size;
      for (int64_t i = 0; i < size; ++i) merge(out[i], src[i], lo);
    }
    return;
  }
#pragma omp parallel for schedule(static) if (threads > 1 && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t o = t / blocks, c0 = (t % blocks) * kColumns;
    columns(o, 0, R, c0, std::min(kColumns, inner - c0), out + o * inner);
  }
}

template <typename T>
void extreme_driver(const T* x, int64_t outer, int64_t R, int64_t inner, T* out, int kind) {
  const StatKernels<T>& k = stat_kernels<T>();
  const bool is_max = kind == kExtMax || kind == kExtAbsMax;
  reduce_driver<T>(
      outer, R, inner, out,
      [&](int64_t o0, int64_t o1, int64_t lo, int64_t hi, T* dst) { k.extreme_rows(x + lo, R, hi - lo, o0, o1, dst, kind); },
      [&](int64_t o, int64_t lo, int64_t hi, int64_t c0, int64_t cw, T* dst) {
        k.extreme_columns(x + (o * R + lo) * inner, hi - lo, inner, c0, cw, dst, kind);
      },
      [&](T& acc, const T& part, int64_t) {
        if (is_nan(acc) || is_nan(part))
          acc = quiet_nan<T>();
        else
          acc = is_max ? std::max(acc, part) : std::min(acc, part);
      });
}

template <typename T>
void arg_driver(const T* x, int64_t outer, int64_t R, int64_t inner, ValueIndex<T>* out, bool is_max) {
  const StatKernels<T>& k = stat_kernels<T>();
  reduce_driver<ValueIndex<T>>(
      outer, R, inner, out,
      [&](int64_t o0, int64_t o1, int64_t lo, int64_t hi, ValueIndex<T>* dst) {
        k.arg_rows(x + lo, R, hi - lo, o0, o1, dst, is_max);
      },
      [&](int64_t o, int64_t lo, int64_t hi, int64_t c0, int64_t cw, ValueIndex<T>* dst) {
        k.arg_columns(x + (o * R + lo) * inner, hi - lo, inner, c0, cw, dst, is_max);
      },
      [&](ValueIndex<T>& acc, const ValueIndex<T>& part, int64_t lo) {
        if (is_max ? beats<T, true>(part.value, acc.value) : beats<T, false>(part.value, acc.value))
          acc = {part.value, part.index + lo};
      });
}

// Moments about center (one per output element; unused except for kMapDev).
template <typename T>
void moments_driver(const T* x, int64_t outer, int64_t R, int64_t inner, const double* center, Moments* out,
                    int map) {
  const StatKernels<T>& k = stat_kernels<T>();
  reduce_driver<Moments>(
      outer, R, inner, out,
      [&](int64_t o0, int64_t o1, int64_t lo, int64_t hi, Moments* dst) {
        k.moments_rows(x + lo, R, hi - lo, o0, o1, center + o0, dst, map);
      },
      [&](int64_t o, int64_t lo, int64_t hi, int64_t c0, int64_t cw, Moments* dst) {
        k.moments_columns(x + (o * R + lo) * inner, hi - lo, inner, c0, cw, center + o * inner, dst, map);
      },
      [](Moments& acc, const Moments& part, int64_t) {
        acc.s1 += part.s1;
        acc.s2 += part.s2;
      });
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

// The sum over every dim outside first..last, which are kept: x folded to [outer, n, inner] gives
// out[j] = sum over (a, b) of x[a, j, b] (a convolution's bias gradient, grad.sum((0, 2, 3))), with no
// transposed copy: first the row sums of the outer * n contiguous runs of inner elements (sum_driver's
// threaded row kernel, each rounded to T once), then per kept element the sum of its outer row sums in
// the accumulator type (float64 for floats). The error stays within the row sums' rounding (half an ulp
// of each) plus the row kernel's; the bits do not depend on the thread count.
template <typename T>
py::array sum_around_typed(const py::array& x, int64_t first, int64_t last) {
  int64_t outer, n, inner;
  fold(x, first, last, outer, n, inner);
  py::array_t<T> out(std::vector<py::ssize_t>(x.shape() + first, x.shape() + last + 1));
  const T* in = static_cast<const T*>(x.data());
  T* o = out.mutable_data();
  py::gil_scoped_release release;
  std::vector<T> rows(static_cast<size_t>(outer * n));
  if (inner == 0)
    std::fill(rows.begin(), rows.end(), T(0));
  else
    sum_driver<T>(in, outer * n, inner, 1, rows.data());
  for (int64_t j = 0; j < n; ++j) {
    AccOf<T> acc = AccOf<T>(0);
    for (int64_t a = 0; a < outer; ++a) acc += AccOf<T>(rows[a * n + j]);
    o[j] = T(acc);
  }
  return std::move(out);
}

py::object sum_around(const py::array& x, int64_t first, int64_t last) {
  check_dims(x, first, last, "sum_around");
  if (!usable(x)) return py::none();
  switch (kind_of(x)) {
    case Kind::kFloat32:
      return sum_around_typed<float>(x, first, last);
    case Kind::kFloat64:
      return sum_around_typed<double>(x, first, last);
    default:
      return sum_around_typed<int64_t>(x, first, last);
  }
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


// ---- entry points of the extrema, arg-extrema and moments -------------------------------------

enum class StatKind { kFloat32, kFloat64, kInt32, kInt64, kOther };

StatKind stat_kind_of(const py::array& x) {
  const py::dtype dt = x.dtype();
  if (dt.is(py::dtype::of<float>())) return StatKind::kFloat32;
  if (dt.is(py::dtype::of<double>())) return StatKind::kFloat64;
  if (dt.is(py::dtype::of<int32_t>())) return StatKind::kInt32;
  if (dt.is(py::dtype::of<int64_t>())) return StatKind::kInt64;
  return StatKind::kOther;
}

// The shape of a reduction's result over dims first..last.
std::vector<py::ssize_t> reduced_shape(const py::array& x, int64_t first, int64_t last, bool keepdim) {
  std::vector<py::ssize_t> shape;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (d < first || d > last)
      shape.push_back(x.shape(d));
    else if (keepdim)
      shape.push_back(1);
  }
  return shape;
}

// Whether these kernels take x: C-contiguous, a dtype they know, a non-empty reduction.
bool stat_usable(const py::array& x, int64_t first, int64_t last, bool floats_only, const char* what) {
  check_dims(x, first, last, what);
  const StatKind kind = stat_kind_of(x);
  if (!(x.flags() & py::array::c_style) || kind == StatKind::kOther) return false;
  if (floats_only && kind != StatKind::kFloat32 && kind != StatKind::kFloat64) return false;
  int64_t outer, n, inner;
  fold(x, first, last, outer, n, inner);
  return n > 0;
}

template <typename T>
py::array extreme_typed(const py::array& x, int64_t first, int64_t last, bool keepdim, int kind) {
  int64_t outer, R, inner;
  fold(x, first, last, outer, R, inner);
  py::array_t<T> out(reduced_shape(x, first, last, keepdim));
  const T* in = static_cast<const T*>(x.data());
  T* o = out.mutable_data();
  {
    py::gil_scoped_release release;
    extreme_driver<T>(in, outer, R, inner, o, kind);
  }
  return std::move(out);
}

py::object extreme_dims(const py::array& x, int64_t first, int64_t last, bool keepdim, int kind) {
  if (kind < kExtMax || kind > kExtAbsMin) throw std::invalid_argument("extreme_dims: kind must be 0..3");
  if (!stat_usable(x, first, last, kind >= kExtAbsMax, "extreme_dims")) return py::none();
  switch (stat_kind_of(x)) {
    case StatKind::kFloat32:
      return extreme_typed<float>(x, first, last, keepdim, kind);
    case StatKind::kFloat64:
      return extreme_typed<double>(x, first, last, keepdim, kind);
    case StatKind::kInt32:
      return extreme_typed<int32_t>(x, first, last, keepdim, kind);
    default:
      return extreme_typed<int64_t>(x, first, last, keepdim, kind);
  }
}

template <typename T>
py::tuple arg_typed(const py::array& x, int64_t dim, bool keepdim, bool is_max) {
  int64_t outer, R, inner;
  fold(x, dim, dim, outer, R, inner);
  const std::vector<py::ssize_t> shape = reduced_shape(x, dim, dim, keepdim);
  py::array_t<T> values(shape);
  py::array_t<int64_t> indices(shape);
  const T* in = static_cast<const T*>(x.data());
  T* v = values.mutable_data();
  int64_t* idx = indices.mutable_data();
  {
    py::gil_scoped_release release;
    std::vector<ValueIndex<T>> result(outer * inner);
    arg_driver<T>(in, outer, R, inner, result.data(), is_max);
    for (size_t i = 0; i < result.size(); ++i) {
      v[i] = result[i].value;
      idx[i] = result[i].index;
    }
  }
  return py::make_tuple(values, indices);
}

py::object arg_extreme_dim(const py::array& x, int64_t dim, bool keepdim, bool is_max) {
  if (!stat_usable(x, dim, dim, false, "arg_extreme_dim")) return py::none();
  const StatKind kind = stat_kind_of(x);
  if ((kind == StatKind::kFloat32 || kind == StatKind::kInt32) && x.shape(dim) >= (int64_t(1) << 31))
    return py::none();  // the column kernel keeps indices in 32-bit lanes
  switch (kind) {
    case StatKind::kFloat32:
      return arg_typed<float>(x, dim, keepdim, is_max);
    case StatKind::kFloat64:
      return arg_typed<double>(x, dim, keepdim, is_max);
    case StatKind::kInt32:
      return arg_typed<int32_t>(x, dim, keepdim, is_max);
    default:
      return arg_typed<int64_t>(x, dim, keepdim, is_max);
  }
}

template <typename T>
py::tuple var_typed(const py::array& x, int64_t first, int64_t last, double correction, bool keepdim) {
  int64_t outer, R, inner;
  fold(x, first, last, outer, R, inner);
  const std::vector<py::ssize_t> shape = reduced_shape(x, first, last, keepdim);
  py::array_t<T> var(shape), mean(shape);
  const T* in = static_cast<const T*>(x.data());
  T* v = var.mutable_data();
  T* m = mean.mutable_data();
  {
    py::gil_scoped_release release;
    const int64_t size = outer * inner;
    std::vector<Moments> moments(size);
    std::vector<double> center(size);
    moments_driver<T>(in, outer, R, inner, center.data(), moments.data(), kMapLinear);
    for (int64_t i = 0; i < size; ++i) center[i] = moments[i].s1 / double(R);
    moments_driver<T>(in, outer, R, inner, center.data(), moments.data(), kMapDev);
    const double dof = std::max(0.0, double(R) - correction);
    for (int64_t i = 0; i < size; ++i) {
      const double s1 = moments[i].s1;
      const double squares = std::max(0.0, moments[i].s2 - s1 * s1 / double(R));
      // a NaN or inf input makes s2 NaN (inf - inf), which max(0, NaN) would hide
      v[i] = static_cast<T>(moments[i].s2 != moments[i].s2 ? moments[i].s2 : squares / dof);
      m[i] = static_cast<T>(center[i]);
    }
  }
  return py::make_tuple(var, mean);
}

py::object var_dims(const py::array& x, int64_t first, int64_t last, double correction, bool keepdim) {
  if (!stat_usable(x, first, last, true, "var_dims")) return py::none();
  if (stat_kind_of(x) == StatKind::kFloat32) return var_typed<float>(x, first, last, correction, keepdim);
  return var_typed<double>(x, first, last, correction, keepdim);
}

template <typename T>
py::array norm_typed(const py::array& x, int64_t first, int64_t last, int p, bool keepdim) {
  int64_t outer, R, inner;
  fold(x, first, last, outer, R, inner);
  py::array_t<T> out(reduced_shape(x, first, last, keepdim));
  const T* in = static_cast<const T*>(x.data());
  T* o = out.mutable_data();
  {
    py::gil_scoped_release release;
    const int64_t size = outer * inner;
    std::vector<Moments> moments(size);
    std::vector<double> center(size);
    moments_driver<T>(in, outer, R, inner, center.data(), moments.data(), p == 1 ? kMapAbs : kMapSquare);
    for (int64_t i = 0; i < size; ++i) o[i] = static_cast<T>(p == 1 ? moments[i].s1 : std::sqrt(moments[i].s2));
  }
  return std::move(out);
}

py::object norm_dims(const py::array& x, int64_t first, int64_t last, int p, bool keepdim) {
  if (p != 1 && p != 2) throw std::invalid_argument("norm_dims: p must be 1 or 2, got " + std::to_string(p));
  if (!stat_usable(x, first, last, true, "norm_dims")) return py::none();
  if (stat_kind_of(x) == StatKind::kFloat32) return norm_typed<float>(x, first, last, p, keepdim);
  return norm_typed<double>(x, first, last, p, keepdim);
}

}  // namespace

void init_copy(py::module_& m);  // csrc/copy.cpp

void init_reduce(py::module_& m) {
  init_copy(m);
  m.def("extreme_dims", &extreme_dims, py::arg("x"), py::arg("first"), py::arg("last"), py::arg("keepdim"),
        py::arg("kind"),
        "Max (kind 0), min (1), max |x| (2) or min |x| (3) of a C-contiguous float32/float64 (0..3) or "
        "int32/int64 (0, 1) array over its adjacent dims first..last; NaN propagates. None for other arrays and "
        "empty reductions.");
  m.def("arg_extreme_dim", &arg_extreme_dim, py::arg("x"), py::arg("dim"), py::arg("keepdim"), py::arg("is_max"),
        "(values, int64 indices) of the max (or min) along dim of a C-contiguous float32/float64/int32/int64 "
        "array: the first occurrence, or the first NaN. None for other arrays and empty reductions.");
  m.def("var_dims", &var_dims, py::arg("x"), py::arg("first"), py::arg("last"), py::arg("correction"),
        py::arg("keepdim"),
        "(variance, mean) of a C-contiguous float32/float64 array over its adjacent dims first..last: two passes "
        "in float64, sum(d^2) - sum(d)^2/n over max(0, n - correction). None for other arrays and empty reductions.");
  m.def("norm_dims", &norm_dims, py::arg("x"), py::arg("first"), py::arg("last"), py::arg("p"), py::arg("keepdim"),
        "The 1- or 2-norm of a C-contiguous float32/float64 array over its adjacent dims first..last, accumulated "
        "in float64. None for other arrays and empty reductions.");
  m.def("sum_around", &sum_around, py::arg("x"), py::arg("first"), py::arg("last"),
        "Sum of a C-contiguous float32/float64/int64 array over every dim outside first..last (which are kept, in "
        "order), without a transposed copy; None for other arrays.");
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
