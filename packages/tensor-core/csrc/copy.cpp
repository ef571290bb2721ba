// ember._C's strided copy with dtype conversion: the CPU path of Tensor.contiguous(), clone(),
// to(dtype) and copy_ for large tensors (ember/_ops/creation.py calls copy_into).
//
// copy_into(dst, src) writes src's elements into dst (same shape; src may have any strides, zero
// strides for broadcast dims included, dst must have a unit stride along its fastest dim). The
// dims are ordered by dst's strides, so that dst is written in memory order, and adjacent dims
// that are contiguous with each other in both arrays are merged. Then, per outer index:
// * when src is also contiguous along that fastest dim, one run of elements (a loop the compiler
//   vectorises for the plain conversions);
// * when src is contiguous along another dim (a transpose), tiles of kTile x kTile elements, read
//   along src's contiguous dim and written along dst's, so both stay in cache;
// * else a strided run.
// OpenMP splits the runs (or tiles) over threads when there are kParallelCopy elements or more.
//
// Conversions give what numpy's astype gives on x86-64 (the reference of the tests):
// * float -> bfloat16 rounds to nearest even; NaN becomes the quiet NaN 0x7fc0 with its sign. (float64 -> bfloat16 and
//   bfloat16 -> int are converted below but copy_into leaves them to numpy: see numpy_varies);
// * float -> float16 by the compiler's _Float16 conversions (F16C where the CPU has it);
// * float -> int truncates toward zero; out of range (and NaN) gives the x86 "integer indefinite"
//   value: the most negative int64 for int64, the most negative int32 for int32, and that value
//   truncated (0) for the narrower types, whose in-range values go through int32 and wrap;
//   bfloat16 -> int follows ml_dtypes instead: 0 when out of the target's range or NaN;
// * anything -> bool is x != 0; bool -> anything is 0 or 1.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#ifdef EMBER_HAS_OPENMP
#include <omp.h>
#endif

namespace py = pybind11;

namespace {

constexpr int64_t kParallelCopy = 1 << 16;  // elements; fewer run on one thread
// Elements of a run that one thread copies at a time when the copy is threaded.
constexpr int64_t kPiece = 1 << 15;
// Side of a transpose tile (elements). Small: each row of a tile is on another page of a large
// matrix, and 8x8 tiles beat 32x32 ones by 1.7x on a 4096x4096 float32 transpose (TLB misses).
constexpr int64_t kTile = 8;

int copy_threads(int64_t n) {
#ifdef EMBER_HAS_OPENMP
  return n >= kParallelCopy ? omp_get_max_threads() : 1;
#else
  (void)n;
  return 1;
#endif
}

// ---- element types and conversions ----------------------------------------------------------

struct BFloat16 {
  uint16_t bits;
};
using Half = _Float16;
struct Bool {
  uint8_t value;
};

inline float bf16_to_float(BFloat16 h) {
  const uint32_t bits = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Without a branch, so that a loop of it vectorises: for NaN, the quiet NaN 0x7fc0 with the sign kept
// (what ml_dtypes gives: the payload is dropped), else rounded to nearest, ties to even.
inline BFloat16 float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint32_t rounded = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
  const uint32_t nan = ((bits >> 16) & 0x8000) | 0x7fc0;
  return {uint16_t(f != f ? nan : rounded)};
}

// float64 -> bfloat16 in one rounding: float32 rounded to odd (toward zero, then the lowest bit set
// if anything was dropped) keeps enough bits for the final round-to-nearest-even to be exact.
inline BFloat16 double_to_bf16(double d) {
  if (d != d) return float_to_bf16(float(d));
  float f = float(d);
  if (std::fabs(double(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  if (double(f) != d && !std::isinf(d)) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits |= 1;
    std::memcpy(&f, &bits, 4);
  }
  return float_to_bf16(f);
}

// The value of s in the widest type its conversions go through.
template <typename S>
inline auto widen(S s) {
  if constexpr (std::is_same_v<S, BFloat16>)
    return bf16_to_float(s);
  else if constexpr (std::is_same_v<S, Half>)
    return float(s);
  else if constexpr (std::is_same_v<S, Bool>)
    return uint8_t(s.value != 0);
  else
    return s;
}

template <typename D, typename F>
inline D float_to_int(F v) {
  if constexpr (sizeof(D) == 8) {
    if (!(v >= F(-9223372036854775808.0) && v < F(9223372036854775808.0))) return std::numeric_limits<int64_t>::min();
    return D(int64_t(v));
  } else {
    if (!(v >= F(-2147483648.0) && v < F(2147483648.0))) return D(std::numeric_limits<int32_t>::min());
    return D(int32_t(v));
  }
}

// bfloat16 -> int as ml_dtypes (numpy's bfloat16) does it: truncated, and 0 when out of range or NaN.
template <typename D>
inline D bf16_to_int(float f) {
  const double t = std::trunc(double(f));
  if (t >= double(std::numeric_limits<D>::min()) && t < double(std::numeric_limits<D>::max()) + 1.0) return D(t);
  return D(0);
}

template <typename S, typename D>
inline D convert(S s) {
  const auto w = widen(s);
  using W = decltype(w);
  if constexpr (std::is_same_v<S, BFloat16> && std::is_integral_v<D>) {
    return bf16_to_int<D>(w);
  } else if constexpr (std::is_same_v<D, Bool>) {
    return {uint8_t(w != W(0))};
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    if constexpr (std::is_same_v<W, float>)
      return float_to_bf16(w);
    else
      return double_to_bf16(double(w));
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<W>) {
    return float_to_int<D>(w);
  } else {
    return static_cast<D>(w);
  }
}

// ---- kernels ----------------------------------------------------------------------------------
// Strides in bytes (src may step backwards or not at all); dst is contiguous along a run.

// float32 -> bfloat16 of contiguous elements (to(bfloat16) of a float32 model or batch): the file is
// compiled for the x86-64 baseline, so the loop is also compiled for AVX2 (twice the lanes) and picked
// at run time. Both give the same bits.
void floats_to_bf16(const float* s, BFloat16* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(s[i]);
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) void floats_to_bf16_avx2(const float* s, BFloat16* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(s[i]);
}
bool cpu_has_avx2() {
  __builtin_cpu_init();  // this runs from a static initializer, maybe before libgcc's
  return __builtin_cpu_supports("avx2");
}
const bool kHasAvx2 = cpu_has_avx2();
#endif

template <typename S, typename D>
struct CopyKernels {
  // dst[i] = src[i * s_step] for i < n.
  static void run(const char* src, int64_t s_step, D* dst, int64_t n) {
    if (s_step == int64_t(sizeof(S))) {
      const S* s = reinterpret_cast<const S*>(src);
      if constexpr (std::is_same_v<S, float> && std::is_same_v<D, BFloat16>) {
#if defined(__x86_64__)
        if (kHasAvx2) return floats_to_bf16_avx2(s, dst, n);
#endif
        return floats_to_bf16(s, dst, n);
      }
      for (int64_t i = 0; i < n; ++i) dst[i] = convert<S, D>(s[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) {
        S v;
        std::memcpy(&v, src + i * s_step, sizeof(S));
        dst[i] = convert<S, D>(v);
      }
    }
  }
  // dst[a * d_row + b] = src[a * s_row + b * s_col] for a < rows, b < cols (src contiguous along a).
  static void tile(const char* src, int64_t s_row, int64_t s_col, D* dst, int64_t d_row, int64_t rows,
                   int64_t cols) {
    for (int64_t b = 0; b < cols; ++b) {
      const char* s = src + b * s_col;
      for (int64_t a = 0; a < rows; ++a) {
        S v;
        std::memcpy(&v, s + a * s_row, sizeof(S));
        dst[a * d_row + b] = convert<S, D>(v);
      }
    }
  }
};

// ---- driver -----------------------------------------------------------------------------------

struct Layout {
  std::vector<int64_t> shape, src, dst;  // dims ordered slowest to fastest in dst; strides in bytes
};

// src and dst's dims ordered by dst's strides (largest first), size-1 dims dropped, and dims that are
// contiguous with the next one in both arrays merged.
Layout plan(const py::array& dst, const py::array& src) {
  const int64_t nd = dst.ndim();
  std::vector<int64_t> order;
  for (int64_t d = 0; d < nd; ++d)
    if (dst.shape(d) != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return std::llabs(dst.strides(a)) > std::llabs(dst.strides(b));
  });
  Layout l;
  for (int64_t d : order) {
    const int64_t n = dst.shape(d), s = src.strides(d), t = dst.strides(d);
    if (!l.shape.empty() && l.src.back() == s * n && l.dst.back() == t * n) {
      l.shape.back() *= n;
      l.src.back() = s;
      l.dst.back() = t;
    } else {
      l.shape.push_back(n);
      l.src.push_back(s);
      l.dst.push_back(t);
    }
  }
  return l;
}

// Byte offsets in src and dst of outer index i of dims [0, count) of l, skipping dim `skip`.
inline void offsets(const Layout& l, int64_t count, int64_t skip, int64_t i, int64_t& so, int64_t& dof) {
  so = dof = 0;
  for (int64_t d = count - 1; d >= 0; --d) {
    if (d == skip) continue;
    const int64_t k = i % l.shape[d];
    i /= l.shape[d];
    so += k * l.src[d];
    dof += k * l.dst[d];
  }
}

// The byte offsets of the outer indices of dims [0, count) of l, in order from a starting index: each step
// adds strides instead of dividing the index anew (a (4, 64, 4, 32) transposed head copy, 1024 runs of 32
// elements, spent most of its time in those divisions: 63 -> 14 us).
struct Odometer {
  const Layout& l;
  int64_t count, src = 0, dst = 0;
  std::vector<int64_t> idx;

  Odometer(const Layout& layout, int64_t dims, int64_t start) : l(layout), count(dims), idx(size_t(dims), 0) {
    for (int64_t d = count - 1; d >= 0; --d) {
      idx[size_t(d)] = start % l.shape[d];
      start /= l.shape[d];
      src += idx[size_t(d)] * l.src[d];
      dst += idx[size_t(d)] * l.dst[d];
    }
  }

  void next() {
    for (int64_t d = count - 1; d >= 0; --d) {
      src += l.src[d];
      dst += l.dst[d];
      if (++idx[size_t(d)] < l.shape[d]) return;
      src -= l.src[d] * l.shape[d];
      dst -= l.dst[d] * l.shape[d];
      idx[size_t(d)] = 0;
    }
  }
};

template <typename S, typename D>
void copy_typed(const Layout& l, const char* src, char* dst) {
  using K = CopyKernels<S, D>;
  const int64_t nd = l.shape.size();
  if (nd == 0) {
    K::run(src, sizeof(S), reinterpret_cast<D*>(dst), 1);
    return;
  }
  const int64_t total = std::accumulate(l.shape.begin(), l.shape.end(), int64_t(1), std::multiplies<int64_t>());
  const int64_t last = nd - 1, n = l.shape[last], s_step = l.src[last];
  // A dim along which src is contiguous while it is not along the last one: tile over the two.
  int64_t across = -1;
  if (s_step != int64_t(sizeof(S)))
    for (int64_t d = 0; d < last; ++d)
      if (l.src[d] == int64_t(sizeof(S)) && l.shape[d] > 1) across = d;
  const int threads = copy_threads(total);
  if (across < 0) {
    // Runs cut into pieces of at most kPiece elements, so that one long run (a contiguous array is
    // merged into one) is shared by the threads too.
    const int64_t runs = total / n, pieces = threads > 1 ? (n + kPiece - 1) / kPiece : 1, tasks = runs * pieces;
    if (pieces == 1) {  // whole runs: each thread takes a range of them and steps from one to the next
#pragma omp parallel num_threads(threads) if (threads > 1 && runs > 1)
      {
#ifdef EMBER_HAS_OPENMP
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        const int64_t t = 0, nt = 1;
#endif
        const int64_t r0 = runs * t / nt, r1 = runs * (t + 1) / nt;
        Odometer at(l, last, r0);
        for (int64_t r = r0; r < r1; ++r, at.next())
          K::run(src + at.src, s_step, reinterpret_cast<D*>(dst + at.dst), n);
      }
      return;
    }
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && tasks > 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t r = t / pieces, lo = (t % pieces) * kPiece, len = std::min(n - lo, pieces > 1 ? kPiece : n);
      int64_t so, dof;
      offsets(l, last, -1, r, so, dof);
      K::run(src + so + lo * s_step, s_step, reinterpret_cast<D*>(dst + dof) + lo, len);
    }
    return;
  }
  const int64_t rows = l.shape[across], row_tiles = (rows + kTile - 1) / kTile, col_tiles = (n + kTile - 1) / kTile;
  const int64_t outer = total / (rows * n), tasks = outer * row_tiles * col_tiles;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t o = t / (row_tiles * col_tiles), a0 = (t / col_tiles % row_tiles) * kTile, b0 = (t % col_tiles) * kTile;
    int64_t so, dof;
    offsets(l, last, across, o, so, dof);
    K::tile(src + so + a0 * l.src[across] + b0 * s_step, l.src[across], s_step,
            reinterpret_cast<D*>(dst + dof + a0 * l.dst[across]) + b0, l.dst[across] / int64_t(sizeof(D)),
            std::min(kTile, rows - a0), std::min(kTile, n - b0));
  }
}

// ---- dtype dispatch ---------------------------------------------------------------------------

enum class Code { kBool, kInt8, kUInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64, kOther };

Code code_of(const py::dtype& dt) {
  const char kind = dt.kind();
  const int64_t size = dt.itemsize();
  if (kind == 'b') return Code::kBool;
  if (kind == 'i')
    return size == 1 ? Code::kInt8 : size == 2 ? Code::kInt16 : size == 4 ? Code::kInt32 : size == 8 ? Code::kInt64 : Code::kOther;
  if (kind == 'u') return size == 1 ? Code::kUInt8 : Code::kOther;
  if (kind == 'f') return size == 2 ? Code::kFloat16 : size == 4 ? Code::kFloat32 : size == 8 ? Code::kFloat64 : Code::kOther;
  // ml_dtypes' bfloat16 is a numpy "void"-kind type named bfloat16
  if (size == 2 && std::string(py::str(dt.attr("name"))) == "bfloat16") return Code::kBFloat16;
  return Code::kOther;
}

template <typename F>
bool with_type(Code c, F&& f) {
  switch (c) {
    case Code::kBool: f(Bool{}); return true;
    case Code::kInt8: f(int8_t{}); return true;
    case Code::kUInt8: f(uint8_t{}); return true;
    case Code::kInt16: f(int16_t{}); return true;
    case Code::kInt32: f(int32_t{}); return true;
    case Code::kInt64: f(int64_t{}); return true;
    case Code::kFloat16: f(Half{}); return true;
    case Code::kBFloat16: f(BFloat16{}); return true;
    case Code::kFloat32: f(float{}); return true;
    case Code::kFloat64: f(double{}); return true;
    default: return false;
  }
}

// Conversions whose numpy result depends on the ml_dtypes version installed: bfloat16 -> an integer
// type out of range (0 in some versions, wrapped in others) and float64 -> bfloat16 (rounded once in
// some, through float32 in others). numpy's astype does them, so ember agrees with the numpy it runs on.
bool numpy_varies(Code src, Code dst) {
  const bool dst_int = dst == Code::kInt8 || dst == Code::kUInt8 || dst == Code::kInt16 || dst == Code::kInt32 ||
                       dst == Code::kInt64;
  return (src == Code::kBFloat16 && dst_int) || (src == Code::kFloat64 && dst == Code::kBFloat16);
}

// Copies src into dst (same shape; see the top of the file). Returns False, having written nothing,
// for what it does not handle (other dtypes, a dst without a unit stride along its fastest dim, a
// non-writeable dst) so that the caller can use numpy instead.
bool copy_into(py::array dst, const py::array& src) {
  if (dst.ndim() != src.ndim()) return false;
  for (int64_t d = 0; d < dst.ndim(); ++d)
    if (dst.shape(d) != src.shape(d)) return false;
  if (!dst.writeable()) return false;
  const Code sc = code_of(src.dtype()), dc = code_of(dst.dtype());
  if (sc == Code::kOther || dc == Code::kOther) return false;
  if (numpy_varies(sc, dc)) return false;
  if (dst.size() == 0) return true;
  const Layout l = plan(dst, src);
  if (!l.shape.empty() && l.dst.back() != dst.itemsize()) return false;
  const char* s = static_cast<const char*>(src.data());
  char* d = static_cast<char*>(dst.mutable_data());
  py::gil_scoped_release release;
  if (sc == dc) {  // a plain copy: move the bits
    switch (dst.itemsize()) {
      case 1: copy_typed<uint8_t, uint8_t>(l, s, d); return true;
      case 2: copy_typed<uint16_t, uint16_t>(l, s, d); return true;
      case 4: copy_typed<uint32_t, uint32_t>(l, s, d); return true;
      default: copy_typed<uint64_t, uint64_t>(l, s, d); return true;
    }
  }
  with_type(sc, [&](auto s_type) {
    with_type(dc, [&](auto d_type) { copy_typed<decltype(s_type), decltype(d_type)>(l, s, d); });
  });
  return true;
}

}  // namespace

void init_copy(py::module_& m) {
  m.def("copy_into", &copy_into, py::arg("dst"), py::arg("src"),
        "Copy src into dst (same shape, any src strides, dst with a unit stride along its fastest dim), converting "
        "between bool, int8, uint8, int16, int32, int64, float16, bfloat16, float32 and float64 as numpy's astype "
        "does; threaded for large arrays. Returns False, writing nothing, for arrays it does not handle.");
}
