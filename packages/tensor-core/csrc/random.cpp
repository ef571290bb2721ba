// Standard normal samples drawn from a PCG64 stream: ember.randn / normal / normal_ on the CPU.
//
// numpy's Generator.standard_normal (a ziggurat calling its bit generator through a function
// pointer per draw) took ~11 ms for 2**20 float64 values, about 3x torch.randn. Here the generator's
// PCG64 state (the 128-bit state and increment numpy keeps; ember/_random.py reads and writes it)
// is stepped in C++ and its 64-bit outputs are turned into normals by the Box-Muller transform:
//
//   u in (0, 1], v uniform on a circle:  r = sqrt(-2 ln u),  (z0, z1) = (r cos v, r sin v)
//
// with ln, sin and cos evaluated by our own polynomials (no libm call), so that the loop is
// vectorised and every machine computes the same bits: only +, -, *, / and sqrt, which IEEE 754
// rounds exactly, and no fused multiply-add (-ffp-contract=off in CMakeLists.txt), whatever
// instruction set variant runs.
//
// The stream, which tests and docs/internals.rst rely on: draws d_0, d_1, ... are PCG64's outputs
// (XSL-RR of the state after each step, as numpy's random_raw gives them). Normals come in pairs:
//
// * float32 (also float16 / bfloat16, converted by the caller): pair k uses one draw d_k; its high
//   32 bits give u, its low 32 bits the angle. n normals advance the stream by ceil(n / 2) draws.
// * float64: pair k uses draws d_2k (u) and d_2k+1 (angle). n normals advance it by 2 ceil(n / 2).
//
// u = 2 - w with w uniform on the grid [1, 2) of 23 (float) or 52 (double) fraction bits, so
// u is never 0 and |z| is at most sqrt(2 ln 2^23) = 5.65 (float32) or 8.49 (float64). The angle:
// two bits pick a quadrant and the rest a uniform offset t in [-pi/4, pi/4), so sin and cos are
// only evaluated on [-pi/4, pi/4] and rotated by quadrant (exact sign and swap moves).
//
// Large fills are split over OpenMP threads, each taking a contiguous range of pairs and jumping
// the PCG64 state to its first draw (PCG's logarithmic-time advance), so the values depend on the
// seed only, not on the thread count.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#ifdef EMBER_HAS_OPENMP
#include <omp.h>
#endif

namespace py = pybind11;

namespace {

using u128 = unsigned __int128;

#define EMBER_RANDOM_INLINE inline __attribute__((always_inline))

// numpy's PCG64 (PCG_DEFAULT_MULTIPLIER_128).
constexpr u128 kPcgMult = (static_cast<u128>(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;

// Pairs generated per inner block (stack buffers of that many draws, or twice that).
constexpr int64_t kBlock = 256;

inline uint64_t pcg_output(u128 state) {
  const uint64_t x = static_cast<uint64_t>(state >> 64) ^ static_cast<uint64_t>(state);
  const unsigned rot = static_cast<unsigned>(state >> 122);
  return (x >> rot) | (x << ((64 - rot) & 63));
}

// (mult, plus) such that stepping `delta` times maps s to mult * s + plus (Brown, "Random number
// generation with arbitrary strides", 1994).
void pcg_jump(uint64_t delta, u128 inc, u128& mult, u128& plus) {
  u128 acc_mult = 1, acc_plus = 0, cur_mult = kPcgMult, cur_plus = inc;
  while (delta > 0) {
    if (delta & 1) {
      acc_mult *= cur_mult;
      acc_plus = acc_plus * cur_mult + cur_plus;
    }
    cur_plus = (cur_mult + 1) * cur_plus;
    cur_mult *= cur_mult;
    delta >>= 1;
  }
  mult = acc_mult;
  plus = acc_plus;
}

u128 pcg_advance(u128 state, u128 inc, uint64_t delta) {
  u128 mult, plus;
  pcg_jump(delta, inc, mult, plus);
  return mult * state + plus;
}

// Four interleaved lanes of one stream: lane j holds the state j steps ahead, and each lane steps
// four at a time, so the 128-bit multiplications of consecutive draws do not wait on each other.
struct PcgLanes {
  u128 s[4];
  u128 mult4, plus4;

  PcgLanes(u128 state, u128 inc) {
    // the first draw is the output of the state after one step
    s[0] = state * kPcgMult + inc;
    for (int j = 1; j < 4; ++j) s[j] = s[j - 1] * kPcgMult + inc;
    pcg_jump(4, inc, mult4, plus4);
  }

  // raw[0 .. n) = the next n draws; n a multiple of 4 (the caller ignores any surplus)
  void fill(uint64_t* raw, int64_t n) {
    for (int64_t i = 0; i < n; i += 4) {
      for (int j = 0; j < 4; ++j) {
        raw[i + j] = pcg_output(s[j]);
        s[j] = s[j] * mult4 + plus4;
      }
    }
  }
};

template <typename T>
struct Bits;

template <>
struct Bits<float> {
  using U = uint32_t;
  using I = int32_t;
  static constexpr int kFraction = 23;
  static constexpr U kOne = 0x3F800000u;  // 1.0f
  static constexpr int kBias = 127;
};

template <>
struct Bits<double> {
  using U = uint64_t;
  using I = int64_t;
  static constexpr int kFraction = 52;
  static constexpr U kOne = 0x3FF0000000000000ULL;  // 1.0
  static constexpr int kBias = 1023;
};

template <typename T>
EMBER_RANDOM_INLINE T from_bits(typename Bits<T>::U u) {
  T x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

template <typename T>
EMBER_RANDOM_INLINE typename Bits<T>::U to_bits(T x) {
  typename Bits<T>::U u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// A number on [1, 2) whose fraction bits are the low kFraction bits of `fraction`.
template <typename T>
EMBER_RANDOM_INLINE T one_to_two(typename Bits<T>::U fraction) {
  constexpr typename Bits<T>::U mask = (typename Bits<T>::U(1) << Bits<T>::kFraction) - 1;
  return from_bits<T>(Bits<T>::kOne | (fraction & mask));
}

// ln x for x normal and positive: x = m 2^e with m in [sqrt(1/2), sqrt(2)) (found on the bits: the
// offset moves the exponent's boundary from 1 to sqrt(1/2)), then
// ln m = 2 atanh(s) = 2 (s + s^3/3 + s^5/5 + ...), s = (m - 1) / (m + 1), |s| <= 0.172.
EMBER_RANDOM_INLINE float log_poly(float x) {
  constexpr uint32_t kSqrtHalf = 0x3F3504F3u;  // sqrt(1/2) rounded down
  const uint32_t shifted = to_bits(x) + (Bits<float>::kOne - kSqrtHalf);
  const int32_t e = static_cast<int32_t>(shifted >> 23) - 127;
  const float m = from_bits<float>((shifted & 0x007FFFFFu) + kSqrtHalf);
  const float s = (m - 1.0f) / (m + 1.0f);
  const float z = s * s;
  const float series = 1.0f + z * (1.0f / 3 + z * (1.0f / 5 + z * (1.0f / 7 + z * (1.0f / 9))));
  const float ef = static_cast<float>(e);
  // ln 2 in two parts: the high part times e (|e| <= 24) is exact
  return ef * 0.693145752f + (ef * 1.42860677e-06f + 2.0f * s * series);
}

EMBER_RANDOM_INLINE double log_poly(double x) {
  constexpr uint64_t kSqrtHalf = 0x3FE6A09E667F3BCCULL;  // sqrt(1/2) rounded down
  const uint64_t shifted = to_bits(x) + (Bits<double>::kOne - kSqrtHalf);
  const int64_t e = static_cast<int64_t>(shifted >> 52) - 1023;
  const double m = from_bits<double>((shifted & 0x000FFFFFFFFFFFFFULL) + kSqrtHalf);
  const double s = (m - 1.0) / (m + 1.0);
  const double z = s * s;
  // sum of z^k / (2k + 1) for k <= 10; the next term is below 1e-18
  const double series = 1.0 + z * (1.0 / 3 + z * (1.0 / 5 + z * (1.0 / 7 + z * (1.0 / 9 + z * (1.0 / 11 + z * (
      1.0 / 13 + z * (1.0 / 15 + z * (1.0 / 17 + z * (1.0 / 19 + z * (1.0 / 21))))))))));
  // e as a double without an int64 conversion (none in SSE2/AVX2): 2^52 + (e + 2048) has e's bits low
  const double ed = from_bits<double>(0x4330000000000000ULL | static_cast<uint64_t>(e + 2048)) - 4503599627372544.0;
  return ed * 6.93147180369123816490e-01 + (ed * 1.90821492927058770002e-10 + 2.0 * s * series);
}

// sin and cos of t in [-pi/4, pi/4]: Taylor polynomials to t^9/t^10 (float: next terms < 2e-9)
// and t^17/t^18 (double: next terms < 1e-19).
EMBER_RANDOM_INLINE void sincos_poly(float t, float& s, float& c) {
  const float z = t * t;
  s = t * (1.0f + z * (-1.0f / 6 + z * (1.0f / 120 + z * (-1.0f / 5040 + z * (1.0f / 362880)))));
  c = 1.0f + z * (-0.5f + z * (1.0f / 24 + z * (-1.0f / 720 + z * (1.0f / 40320 + z * (-1.0f / 3628800)))));
}

EMBER_RANDOM_INLINE void sincos_poly(double t, double& s, double& c) {
  const double z = t * t;
  s = t * (1.0 + z * (-1.0 / 6 + z * (1.0 / 120 + z * (-1.0 / 5040 + z * (1.0 / 362880 + z * (-1.0 / 39916800 +
      z * (1.0 / 6227020800.0 + z * (-1.0 / 1307674368000.0 + z * (1.0 / 355687428096000.0)))))))));
  c = 1.0 + z * (-0.5 + z * (1.0 / 24 + z * (-1.0 / 720 + z * (1.0 / 40320 + z * (-1.0 / 3628800 + z * (1.0 /
      479001600.0 + z * (-1.0 / 87178291200.0 + z * (1.0 / 20922789888000.0 + z * (-1.0 / 6402373705728000.0)))))))));
}

// One pair of normals from u's fraction bits and the angle's quadrant and fraction bits.
template <typename T>
EMBER_RANDOM_INLINE void box_muller(typename Bits<T>::U u_bits, unsigned quadrant, typename Bits<T>::U t_bits, T& z0, T& z1) {
  const T u = T(2) - one_to_two<T>(u_bits);  // (0, 1]
  const T r = std::sqrt(T(-2) * log_poly(u));
  const T t = (one_to_two<T>(t_bits) - T(1.5)) * T(1.57079632679489661923);  // [-pi/4, pi/4)
  T s, c;
  sincos_poly(t, s, c);
  // rotate (c, s) by quadrant * 90 degrees; multiplying by 0, 1 and -1 is exact, so this is the
  // select (odd ? (-s, c) : (c, s)), then a sign flip, written without branches
  const T odd = T(quadrant & 1), sign = T(1) - T(quadrant & 2);
  const T x = sign * ((T(1) - odd) * c - odd * s);
  const T y = sign * ((T(1) - odd) * s + odd * c);
  z0 = r * x;
  z1 = r * y;
}

// z[0 .. 2 * pairs) from the raw draws of those pairs, as mean + std * normal. Inlined into each
// instruction-set variant below; the loops have no branch (-fno-math-errno lets sqrt vectorise).
template <bool AFFINE>
EMBER_RANDOM_INLINE void pairs_from_draws(const uint64_t* raw, int64_t pairs, float mean, float std_, float* z) {
  for (int64_t k = 0; k < pairs; ++k) {
    const uint64_t d = raw[k];
    const uint32_t hi = static_cast<uint32_t>(d >> 32), lo = static_cast<uint32_t>(d);
    float z0, z1;
    box_muller<float>(hi >> 9, lo >> 30, lo >> 7, z0, z1);
    z[2 * k] = AFFINE ? mean + std_ * z0 : z0;
    z[2 * k + 1] = AFFINE ? mean + std_ * z1 : z1;
  }
}

template <bool AFFINE>
EMBER_RANDOM_INLINE void pairs_from_draws(const uint64_t* raw, int64_t pairs, double mean, double std_, double* z) {
  for (int64_t k = 0; k < pairs; ++k) {
    const uint64_t a = raw[2 * k], b = raw[2 * k + 1];
    double z0, z1;
    box_muller<double>(a >> 12, static_cast<unsigned>(b >> 62), b >> 10, z0, z1);
    z[2 * k] = AFFINE ? mean + std_ * z0 : z0;
    z[2 * k + 1] = AFFINE ? mean + std_ * z1 : z1;
  }
}

// The loop for the baseline instruction set and for AVX2 (no FMA: the bits stay the baseline's).
template <typename T>
void pairs_baseline(const uint64_t* raw, int64_t pairs, T mean, T std_, bool affine, T* z) {
  if (affine)
    pairs_from_draws<true>(raw, pairs, mean, std_, z);
  else
    pairs_from_draws<false>(raw, pairs, mean, std_, z);
}

template <typename T>
__attribute__((target("avx2"))) void pairs_avx2(const uint64_t* raw, int64_t pairs, T mean, T std_, bool affine,
                                                T* z) {
  if (affine)
    pairs_from_draws<true>(raw, pairs, mean, std_, z);
  else
    pairs_from_draws<false>(raw, pairs, mean, std_, z);
}

template <typename T>
constexpr int64_t draws_per_pair() {
  return sizeof(T) == 4 ? 1 : 2;
}

// out[2 p .. min(n, 2 (p + pairs))) from the draws of pairs p .. p + pairs (at most kBlock of them).
template <typename T>
void write_pairs(const uint64_t* raw, int64_t p, int64_t pairs, T* out, int64_t n, T mean, T std_, bool affine,
                 bool avx2) {
  alignas(64) T z[2 * kBlock];
  const int64_t first = 2 * p, count = std::min(2 * pairs, n - first);
  // full blocks are written in place; the last, which may end in half a pair, through z
  T* dst = count == 2 * pairs ? out + first : z;
  if (avx2)
    pairs_avx2<T>(raw, pairs, mean, std_, affine, dst);
  else
    pairs_baseline<T>(raw, pairs, mean, std_, affine, dst);
  if (dst == z) std::memcpy(out + first, z, count * sizeof(T));
}

// Fill out[lo_pair * 2 .. min(n, hi_pair * 2)) from the stream that starts at `state`.
template <typename T>
void fill_range(T* out, int64_t n, int64_t lo_pair, int64_t hi_pair, u128 state, u128 inc, T mean, T std_,
                bool affine, bool avx2) {
  constexpr int64_t per = draws_per_pair<T>();
  PcgLanes lanes(pcg_advance(state, inc, static_cast<uint64_t>(lo_pair * per)), inc);
  alignas(64) uint64_t raw[kBlock * per];
  for (int64_t p = lo_pair; p < hi_pair; p += kBlock) {
    const int64_t pairs = std::min(kBlock, hi_pair - p);
    lanes.fill(raw, (pairs * per + 3) & ~int64_t(3));
    write_pairs<T>(raw, p, pairs, out, n, mean, std_, affine, avx2);
  }
}

bool has_avx2() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
}

int threads_for(int64_t n, int64_t min_parallel) {
#ifdef EMBER_HAS_OPENMP
  if (n >= min_parallel) return omp_get_max_threads();
#endif
  (void)n;
  (void)min_parallel;
  return 1;
}

u128 join(uint64_t hi, uint64_t lo) { return (static_cast<u128>(hi) << 64) | lo; }

template <typename T>
py::tuple normal_fill_typed(py::array out, u128 state, u128 inc, double mean, double std_, int64_t min_parallel) {
  const int64_t n = out.size();
  const int64_t pairs = (n + 1) / 2;
  T* data = static_cast<T*>(out.mutable_data());
  const bool affine = !(mean == 0.0 && std_ == 1.0);
  const bool avx2 = has_avx2();
  {
    py::gil_scoped_release release;
    const int threads = threads_for(n, min_parallel);
    if (threads <= 1) {
      fill_range<T>(data, n, 0, pairs, state, inc, T(mean), T(std_), affine, avx2);
    } else {
#ifdef EMBER_HAS_OPENMP
#pragma omp parallel num_threads(threads)
      {
        const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
        // contiguous ranges, whole blocks each, so any split gives the values of the serial fill
        const int64_t blocks = (pairs + kBlock - 1) / kBlock;
        const int64_t lo = blocks * id / nt * kBlock, hi = std::min(pairs, blocks * (id + 1) / nt * kBlock);
        if (lo < hi) fill_range<T>(data, n, lo, hi, state, inc, T(mean), T(std_), affine, avx2);
      }
#endif
    }
  }
  const u128 next = pcg_advance(state, inc, static_cast<uint64_t>(pairs * draws_per_pair<T>()));
  return py::make_tuple(static_cast<uint64_t>(next >> 64), static_cast<uint64_t>(next));
}

// Fill `out` (a C-contiguous float32 or float64 array) with mean + std * N(0, 1) samples drawn from the
// PCG64 stream (state_hi:state_lo, inc_hi:inc_lo); returns the state after the draws as (hi, lo).
py::tuple normal_fill(py::array out, uint64_t state_hi, uint64_t state_lo, uint64_t inc_hi, uint64_t inc_lo,
                      double mean, double std_, int64_t min_parallel) {
  if (!(out.flags() & py::array::c_style)) throw std::invalid_argument("normal_fill: out must be C-contiguous");
  if (!out.writeable()) throw std::invalid_argument("normal_fill: out must be writeable");
  if (!(inc_lo & 1)) throw std::invalid_argument("normal_fill: the PCG64 increment must be odd");
  const u128 state = join(state_hi, state_lo), inc = join(inc_hi, inc_lo);
  if (out.dtype().is(py::dtype::of<float>()))
    return normal_fill_typed<float>(out, state, inc, mean, std_, min_parallel);
  if (out.dtype().is(py::dtype::of<double>()))
    return normal_fill_typed<double>(out, state, inc, mean, std_, min_parallel);
  throw std::invalid_argument("normal_fill: out must be float32 or float64, got " +
                              py::str(out.dtype()).cast<std::string>());
}

template <typename T>
void normal_from_draws_typed(py::array out, const uint64_t* raw, double mean, double std_) {
  const int64_t n = out.size(), pairs = (n + 1) / 2;
  T* data = static_cast<T*>(out.mutable_data());
  const bool affine = !(mean == 0.0 && std_ == 1.0), avx2 = has_avx2();
  for (int64_t p = 0; p < pairs; p += kBlock)
    write_pairs<T>(raw + p * draws_per_pair<T>(), p, std::min(kBlock, pairs - p), data, n, T(mean), T(std_), affine,
                   avx2);
}

// normal_fill's values from draws taken already (numpy's random_raw): `raw` holds ceil(n / 2) draws
// for float32 and 2 ceil(n / 2) for float64. Small fills take this way, which skips the state's round
// trip through a Python dict.
void normal_from_draws(py::array out, py::array_t<uint64_t, py::array::c_style> raw, double mean, double std_) {
  if (!(out.flags() & py::array::c_style)) throw std::invalid_argument("normal_from_draws: out must be C-contiguous");
  if (!out.writeable()) throw std::invalid_argument("normal_from_draws: out must be writeable");
  const bool single = out.dtype().is(py::dtype::of<float>());
  if (!single && !out.dtype().is(py::dtype::of<double>()))
    throw std::invalid_argument("normal_from_draws: out must be float32 or float64, got " +
                                py::str(out.dtype()).cast<std::string>());
  const int64_t want = (out.size() + 1) / 2 * (single ? 1 : 2);
  if (raw.size() != want)
    throw std::invalid_argument("normal_from_draws: expected " + std::to_string(want) + " draws for " +
                                std::to_string(out.size()) + " values, got " + std::to_string(raw.size()));
  if (single)
    normal_from_draws_typed<float>(out, raw.data(), mean, std_);
  else
    normal_from_draws_typed<double>(out, raw.data(), mean, std_);
}

// The first n raw draws of the stream (numpy's random_raw), and the state after them: for tests.
py::tuple pcg64_raw(uint64_t state_hi, uint64_t state_lo, uint64_t inc_hi, uint64_t inc_lo, int64_t n) {
  if (n < 0) throw std::invalid_argument("pcg64_raw: n must be >= 0, got " + std::to_string(n));
  const u128 state = join(state_hi, state_lo), inc = join(inc_hi, inc_lo);
  py::array_t<uint64_t> raw(n);
  uint64_t* p = raw.mutable_data();
  u128 s = state;
  for (int64_t i = 0; i < n; ++i) {
    s = s * kPcgMult + inc;
    p[i] = pcg_output(s);
  }
  const u128 next = pcg_advance(state, inc, static_cast<uint64_t>(n));
  return py::make_tuple(raw, static_cast<uint64_t>(next >> 64), static_cast<uint64_t>(next));
}

}  // namespace

void init_random(py::module_& m) {
  m.def("normal_fill", &normal_fill, py::arg("out"), py::arg("state_hi"), py::arg("state_lo"), py::arg("inc_hi"),
        py::arg("inc_lo"), py::arg("mean"), py::arg("std"), py::arg("min_parallel"),
        "Fill a contiguous float32/float64 array with mean + std * standard normals from a PCG64 stream "
        "(Box-Muller); returns the advanced state as (hi, lo).");
  m.def("normal_from_draws", &normal_from_draws, py::arg("out"), py::arg("raw"), py::arg("mean"), py::arg("std"),
        "normal_fill's values from the raw 64-bit draws it would take (ceil(n/2) for float32, twice that for "
        "float64).");
  m.def("pcg64_raw", &pcg64_raw, py::arg("state_hi"), py::arg("state_lo"), py::arg("inc_hi"), py::arg("inc_lo"),
        py::arg("n"), "The next n raw 64-bit PCG64 draws and the advanced state (hi, lo); for tests.");
}
