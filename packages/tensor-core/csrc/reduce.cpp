// ember._C kernels for sum and the scans cumsum/cumprod (ember/_ops/reductions.py).
//
// Every kernel sees its input as a C-contiguous 3-D array [outer, n, inner] and
// works along the middle axis: the Python side folds the dims before, after and
// across the reduced (or scanned) dims into outer, inner and n. inner == 1 is
// the common "last axis" case and gets its own loops, because there the work
// runs along contiguous memory instead of across it.
//
// Accuracy (float32, float64):
// * sum: each row is cut into blocks; inside a block many independent lanes
//   accumulate a few elements each in the input's type, the lanes of a block
//   are combined pairwise and the block's result is added to a float64
//   accumulator, which is flushed every 64 blocks into another (so a float64
//   lane never adds more than a few hundred terms). This is the blocked form
//   of pairwise summation (Higham, "The accuracy of floating point summation",
//   SIAM J. Sci. Comput. 14(4), 1993): the error grows with the block length
//   and the logarithm of the row length, not with the row length as in a
//   single running sum. Across rows ("sum over a middle axis") the elements of
//   4 rows are added pairwise, 16 rows are accumulated in the input's type and
//   then added to float64 accumulators.
// * cumsum/cumprod: float32 accumulates in float64 and rounds each output once
//   (as PyTorch's CPU kernel does, whose float32 results equal the float64
//   scan rounded to float32); float64 accumulates in float64. int64 wraps
//   around on overflow, like numpy and PyTorch (the arithmetic is done on
//   uint64, where wrapping is defined).
//
// Speed: the inner loops use GCC vector extensions of 64 bytes and are compiled
// three times, for AVX-512, AVX2 and the x86-64 baseline; the best one that the
// CPU supports is chosen once, at import. OpenMP splits the work over
// independent rows (or over column blocks, or over parts of one long row) when
// there is enough of it (kParallelWork elements).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#ifdef EMBER_HAS_OPENMP
#include <omp.h>
#endif

#if !defined(__GNUC__)
#error "reduce.cpp needs GCC or Clang (vector extensions and target attributes)"
#endif

namespace py = pybind11;

// The 64-byte vector types below only live inside always-inline functions, so the note that
// passing them by value has no stable ABI without AVX-512 does not concern us.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

// Work (elements) below which a kernel runs on one thread: a parallel region costs more.
constexpr int64_t kParallelWork = 1 << 15;

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

// out[c0 + j] = sum over r of x[r, c0 + j] for j < cw, for x [R, inner] (one outer index).
template <typename T>
EMBER_ALWAYS_INLINE void sum_columns(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw, T* out) {
  using Lane = LaneOf<T>;
  using Acc = AccOf<T>;
  Lane lo[kColumns];
  Acc acc[kColumns];
  for (int64_t j = 0; j < cw; ++j) acc[j] = 0;
  int64_t r = 0;
  while (r < R) {
    const int64_t r_end = std::min(R, r + kRowBlock);
    for (int64_t j = 0; j < cw; ++j) lo[j] = 0;
    for (; r + 4 <= r_end; r += 4) {
      const T* p0 = x + r * inner + c0;
      const T* p1 = p0 + inner;
      const T* p2 = p1 + inner;
      const T* p3 = p2 + inner;
      for (int64_t j = 0; j < cw; ++j)
        lo[j] += (Lane(p0[j]) + Lane(p1[j])) + (Lane(p2[j]) + Lane(p3[j]));
    }
    for (; r < r_end; ++r) {
      const T* p = x + r * inner + c0;
      for (int64_t j = 0; j < cw; ++j) lo[j] += Lane(p[j]);
    }
    for (int64_t j = 0; j < cw; ++j) acc[j] += Acc(lo[j]);
  }
  for (int64_t j = 0; j < cw; ++j) out[c0 + j] = static_cast<T>(acc[j]);
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

// Scans of rows [r0, r1) of x [rows, n], four rows side by side.
template <typename T, typename Op>
EMBER_ALWAYS_INLINE void scan_rows(const T* x, T* y, int64_t n, int64_t r0, int64_t r1) {
  using Acc = AccOf<T>;
  constexpr Acc id = Op::template identity<Acc>();
  int64_t r = r0;
  if (n < kSegmentedScan) {
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
  template <typename T>                                                                                       \
  TARGET void sum_columns_k(const T* x, int64_t R, int64_t inner, int64_t c0, int64_t cw, T* out) {           \
    sum_columns<T>(x, R, inner, c0, cw, out);                                                                 \
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
    return {&sum_contiguous_k<T>,         &sum_rows_k<T>,       &sum_columns_k<T>,                           \
            &acc_total_k<T>,              &cumsum_row_k<T>,     &scan_rows_k<T, AddOp>,                      \
            &scan_rows_k<T, MulOp>,       &scan_columns_k<T, AddOp>, &scan_columns_k<T, MulOp>};             \
  }                                                                                                           \
  }

EMBER_REDUCE_VARIANT(baseline, )
#if defined(__x86_64__) || defined(__i386__)
EMBER_REDUCE_VARIANT(avx2, __attribute__((target("avx2"))))
EMBER_REDUCE_VARIANT(avx512, __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,prefer-vector-width=512"))))
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
  const int64_t threads = work > kParallelWork ? max_threads() : 1;
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
    // Whole groups of four rows per thread where possible.
    const int64_t groups = (outer + 3) / 4;
#pragma omp parallel for schedule(static) if (parts > 1)
    for (int64_t part = 0; part < parts; ++part) {
      int64_t lo, hi;
      split(groups, parts, part, lo, hi);
      (kSum ? k.cumsum_rows : k.cumprod_rows)(x, y, n, lo * 4, std::min(outer, hi * 4));
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

void check_input(const py::array& x, const char* what) {
  if (x.ndim() != 3) throw std::invalid_argument(std::string(what) + ": expected a 3-D array [outer, n, inner]");
  if (!(x.flags() & py::array::c_style)) throw std::invalid_argument(std::string(what) + ": array must be C-contiguous");
}

template <typename T>
py::array sum_typed(const py::array& x) {
  const int64_t outer = x.shape(0), R = x.shape(1), inner = x.shape(2);
  py::array_t<T> out({outer, inner});
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

py::array reduce_sum(const py::array& x) {
  check_input(x, "reduce_sum");
  auto dt = x.dtype();
  if (dt.is(py::dtype::of<float>())) return sum_typed<float>(x);
  if (dt.is(py::dtype::of<double>())) return sum_typed<double>(x);
  if (dt.is(py::dtype::of<int64_t>())) return sum_typed<int64_t>(x);
  throw std::invalid_argument("reduce_sum: unsupported dtype (expected float32, float64 or int64)");
}

template <typename T, bool kSum>
py::array scan_typed(const py::array& x) {
  const int64_t outer = x.shape(0), n = x.shape(1), inner = x.shape(2);
  py::array_t<T> out({outer, n, inner});
  const T* in = static_cast<const T*>(x.data());
  T* o = out.mutable_data();
  {
    py::gil_scoped_release release;
    scan_driver<T, kSum>(in, outer, n, inner, o);
  }
  return std::move(out);
}

template <bool kSum>
py::array scan(const py::array& x) {
  const char* what = kSum ? "cumsum" : "cumprod";
  check_input(x, what);
  auto dt = x.dtype();
  if (dt.is(py::dtype::of<float>())) return scan_typed<float, kSum>(x);
  if (dt.is(py::dtype::of<double>())) return scan_typed<double, kSum>(x);
  if (dt.is(py::dtype::of<int64_t>())) return scan_typed<int64_t, kSum>(x);
  throw std::invalid_argument(std::string(what) + ": unsupported dtype (expected float32, float64 or int64)");
}

}  // namespace

void init_reduce(py::module_& m) {
  m.def("reduce_sum", &reduce_sum, py::arg("x"),
        "Sum of a C-contiguous float32/float64/int64 array [outer, n, inner] over its middle axis -> [outer, inner] "
        "(blocked pairwise summation with float64 block accumulators; int64 wraps around).");
  m.def("cumsum", &scan<true>, py::arg("x"),
        "Cumulative sum along the middle axis of a C-contiguous float32/float64/int64 array [outer, n, inner] "
        "(accumulated in float64 for floats; int64 wraps around).");
  m.def("cumprod", &scan<false>, py::arg("x"),
        "Cumulative product along the middle axis of a C-contiguous float32/float64/int64 array [outer, n, inner] "
        "(accumulated in float64 for floats; int64 wraps around).");
  m.def("set_reduce_isa", &set_reduce_isa, py::arg("name"),
        "Use the sum/cumsum/cumprod kernels compiled for this instruction set (for tests); returns the previous one.");
  m.def("supported_reduce_isas", &supported_reduce_isas,
        "The instruction sets of the sum/cumsum/cumprod kernels that this CPU can run, best first.");
}
