// The kernels of csrc/nn_rows_backward.cpp, included there twice: once for the x86-64 baseline and once
// under `#pragma GCC target("avx2,fma")`. No includes: the .cpp includes what they need first, and
// wide_math.h (exp_clamped, erf_wide) inside each namespace.

constexpr int64_t kParallelElements = int64_t(1) << 15;

// exp, erf and tanh of a float64 value for a result of type T: float32 results take wide_math.h's
// vectorisable versions (errors far below float32's rounding), float64 results the C library's.
// (float32: 0 below -104, where e**v rounds to 0 in float32, so masked -inf entries stay exact zeros)
template <typename T>
double exp_t(double v) {
  if constexpr (std::is_same_v<T, float>) {
    const double e = exp_clamped(v < -100.0 ? -100.0 : (v > 100.0 ? 100.0 : v));
    return v < -104.0 ? 0.0 : e;
  } else {
    return std::exp(v);
  }
}

template <typename T>
double erf_t(double v) {
  if constexpr (std::is_same_v<T, float>) return erf_wide(v);
  else return std::erf(v);
}

template <typename T>
double tanh_t(double v) {
  if constexpr (std::is_same_v<T, float>) {
    const double a = v < 0 ? -v : v;
    const double big = 1.0 - 2.0 / (exp_clamped(a < 20.0 ? 2.0 * a : 40.0) + 1.0);
    return a < 0x1p-20 ? v : (v < 0 ? -big : big);
  } else {
    return std::tanh(v);
  }
}

// Row sums with eight float64 partial sums added in a fixed order at the end: GCC vectorises the eight lanes
// without reassociating anything, so every instruction set gives the same bits.
#define EMBER_SUM8(N, TERM)                                            \
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                            \
  int64_t j = 0;                                                       \
  for (; j + 8 <= (N); j += 8)                                         \
    for (int k = 0; k < 8; ++k) acc[k] += (TERM(j + k));               \
  double tail = 0.0;                                                   \
  for (; j < (N); ++j) tail += (TERM(j));                              \
  const double total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;

// One row of softmax's (y (g - sum(g y))) or log_softmax's (g - exp(y) sum(g)) gradient. Rows are functions
// of their own (not inlined), with restrict pointers: inside an OpenMP region GCC left the loops scalar.
template <typename T>
__attribute__((noinline)) void softmax_backward_row(const T* __restrict__ y, const T* __restrict__ g,
                                                    T* __restrict__ out, int64_t n, bool log) {
  if (log) {
#define EMBER_TERM(i) double(g[i])
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    const T s = T(total);
    for (int64_t i = 0; i < n; ++i) out[i] = g[i] - T(exp_t<T>(double(y[i]))) * s;
  } else {
#define EMBER_TERM(i) double(g[i]) * double(y[i])
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    const T s = T(total);
    for (int64_t i = 0; i < n; ++i) out[i] = y[i] * (g[i] - s);
  }
}

template <typename T>
void softmax_backward_rows(const T* y, const T* g, T* dx, int64_t rows, int64_t n, bool log) {
#pragma omp parallel for if (rows * n > kParallelElements)
  for (int64_t r = 0; r < rows; ++r) softmax_backward_row<T>(y + r * n, g + r * n, dx + r * n, n, log);
}

// One row of layer_norm's backward: the statistics (float64, two passes) into *mean and *rstd, and dx.
template <typename T>
__attribute__((noinline)) void layer_norm_backward_row(const T* __restrict__ x, const T* __restrict__ g,
                                                       const T* __restrict__ w, double eps, T* __restrict__ dx,
                                                       double* mean, double* rstd, int64_t n) {
  double m, s;
  {
#define EMBER_TERM(i) double(x[i])
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    m = total / double(n);
  }
  {
#define EMBER_TERM(i) (double(x[i]) - m) * (double(x[i]) - m)
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    s = 1.0 / std::sqrt(total / double(n) + eps);
  }
  *mean = m;
  *rstd = s;
  if (dx == nullptr) return;
  double a, b;
  if (w != nullptr) {
#define EMBER_TERM(i) double(g[i]) * double(w[i])
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    a = total / double(n);
  } else {
#define EMBER_TERM(i) double(g[i])
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    a = total / double(n);
  }
  if (w != nullptr) {
#define EMBER_TERM(i) double(g[i]) * double(w[i]) * ((double(x[i]) - m) * s)
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    b = total / double(n);
  } else {
#define EMBER_TERM(i) double(g[i]) * ((double(x[i]) - m) * s)
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    b = total / double(n);
  }
  if (w != nullptr)
    for (int64_t i = 0; i < n; ++i) dx[i] = T(s * (double(g[i]) * double(w[i]) - a - (double(x[i]) - m) * s * b));
  else
    for (int64_t i = 0; i < n; ++i) dx[i] = T(s * (double(g[i]) - a - (double(x[i]) - m) * s * b));
}

// Columns lo..hi of the parameters' gradients: dw += g xhat, db += g over every row, rows in order.
template <typename T>
__attribute__((noinline)) void layer_norm_param_columns(const T* __restrict__ x, const T* __restrict__ g,
                                                        const double* __restrict__ mean,
                                                        const double* __restrict__ rstd, double* __restrict__ dw,
                                                        double* __restrict__ db, int64_t rows, int64_t n,
                                                        int64_t lo, int64_t hi) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* __restrict__ xr = x + r * n;
    const T* __restrict__ gr = g + r * n;
    const double m = mean[r], s = rstd[r];
    if (dw != nullptr)
      for (int64_t j = lo; j < hi; ++j) dw[j] += double(gr[j]) * ((double(xr[j]) - m) * s);
    if (db != nullptr)
      for (int64_t j = lo; j < hi; ++j) db[j] += double(gr[j]);
  }
}

// layer_norm over rows of n: xhat = (x - mean) rstd, rstd = 1 / sqrt(var + eps) (biased variance, both in
// float64); with gw = g w: dx = rstd (gw - mean(gw) - xhat mean(gw xhat)), dw = sum over rows of g xhat,
// db = sum over rows of g (float64 column sums, rows in order: the same bits on any thread count).
template <typename T>
void layer_norm_backward_rows(const T* x, const T* g, const T* w, double eps, T* dx, double* dw, double* db,
                              double* mean, double* rstd, int64_t rows, int64_t n) {
#pragma omp parallel for if (rows * n > kParallelElements)
  for (int64_t r = 0; r < rows; ++r)
    layer_norm_backward_row<T>(x + r * n, g + r * n, w, eps, dx == nullptr ? nullptr : dx + r * n, mean + r,
                               rstd + r, n);
  if (dw == nullptr && db == nullptr) return;
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for if (rows * n > kParallelElements)
  for (int64_t k = 0; k < blocks; ++k)
    layer_norm_param_columns<T>(x, g, mean, rstd, dw, db, rows, n, k * kBlock,
                                k * kBlock + kBlock < n ? k * kBlock + kBlock : n);
}

constexpr double kSqrtHalf = 0.70710678118654752440, kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588, kKappa = 0.044715;

// gelu's gradient on count elements: exact g (Phi(x) + x phi(x)); tanh form g (0.5 (1 + t) + 0.5 x (1 - t^2)
// u'), u = sqrt(2/pi) (x + 0.044715 x^3), t = tanh(u). float32 in float64 (erf_wide, exp_clamped).
template <typename T, bool kTanh>
__attribute__((noinline)) void gelu_backward_chunk(const T* __restrict__ g, const T* __restrict__ x,
                                                   T* __restrict__ dx, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const double v = double(x[i]);
    double d;
    if constexpr (kTanh) {
      const double u = kSqrt2OverPi * (v + kKappa * v * v * v);
      const double t = tanh_t<T>(u);
      d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * (kSqrt2OverPi * (1.0 + 3.0 * kKappa * v * v));
    } else {
      d = (0.5 + 0.5 * erf_t<T>(v * kSqrtHalf)) + v * exp_t<T>(-0.5 * v * v) * kInvSqrt2Pi;
    }
    dx[i] = T(double(g[i]) * d);
  }
}

template <typename T>
void gelu_backward_array(const T* g, const T* x, T* dx, int64_t count, bool tanh_form) {
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for if (count > kParallelElements) schedule(static)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t lo = k * kChunk, len = lo + kChunk < count ? kChunk : count - lo;
    if (tanh_form) gelu_backward_chunk<T, true>(g + lo, x + lo, dx + lo, len);
    else gelu_backward_chunk<T, false>(g + lo, x + lo, dx + lo, len);
  }
}

// ---- forward rows (short rows: the generic kernels of nn_kernels.cpp cost about 0.5 us a row) -------------

// exp_float (wide_math.h) for float32: eight lanes per AVX2 vector where the float64 exp_t has four.
template <typename T>
T exp_row(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_float(x);
  else return std::exp(x);
}

// The row's maximum as eight running maxima combined in a fixed order; NaN entries are skipped here, and
// give NaN throughout through exp below (as the other kernels do).
template <typename T>
T row_max8(const T* __restrict__ x, int64_t n) {
  const T lowest = -std::numeric_limits<T>::infinity();
  T acc[8] = {lowest, lowest, lowest, lowest, lowest, lowest, lowest, lowest};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) acc[k] = x[j + k] > acc[k] ? x[j + k] : acc[k];
  T m = lowest;
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  for (int k = 0; k < 8; ++k) m = acc[k] > m ? acc[k] : m;
  return m;
}

// softmax: y = e / sum(e), e = exp(x - max) in T (exp_float for float32), then scaled by the rounded
// 1 / sum as nn_kernels.cpp does; log_softmax: y = x - (max + log(sum(e))); the sums in float64.
template <typename T>
__attribute__((noinline)) void softmax_forward_row(const T* __restrict__ x, T* __restrict__ y, int64_t n, bool log) {
  const T m = row_max8<T>(x, n);
  const double md = double(m);
  if (log) {
    for (int64_t i = 0; i < n; ++i) y[i] = exp_row<T>(x[i] - m);  // scratch: overwritten below
#define EMBER_TERM(i) double(y[i])
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    const T shift = T(md + std::log(total));
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] - shift;
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = exp_row<T>(x[i] - m);
#define EMBER_TERM(i) double(y[i])
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    const T inv = T(1.0 / total);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

template <typename T>
void softmax_forward_rows(const T* x, T* y, int64_t rows, int64_t n, bool log) {
#pragma omp parallel for if (rows * n > kParallelElements)
  for (int64_t r = 0; r < rows; ++r) softmax_forward_row<T>(x + r * n, y + r * n, n, log);
}

// layer_norm of one row: (x - mean) * rstd * w + b with float64 statistics (two passes), rounded once.
template <typename T>
__attribute__((noinline)) void layer_norm_forward_row(const T* __restrict__ x, const T* __restrict__ w,
                                                      const T* __restrict__ b, double eps, T* __restrict__ y,
                                                      int64_t n) {
  double m, s;
  {
#define EMBER_TERM(i) double(x[i])
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    m = total / double(n);
  }
  {
#define EMBER_TERM(i) (double(x[i]) - m) * (double(x[i]) - m)
    EMBER_SUM8(n, EMBER_TERM)
#undef EMBER_TERM
    s = 1.0 / std::sqrt(total / double(n) + eps);
  }
  if (w != nullptr && b != nullptr)
    for (int64_t i = 0; i < n; ++i) y[i] = T((double(x[i]) - m) * s * double(w[i]) + double(b[i]));
  else if (w != nullptr)
    for (int64_t i = 0; i < n; ++i) y[i] = T((double(x[i]) - m) * s * double(w[i]));
  else if (b != nullptr)
    for (int64_t i = 0; i < n; ++i) y[i] = T((double(x[i]) - m) * s + double(b[i]));
  else
    for (int64_t i = 0; i < n; ++i) y[i] = T((double(x[i]) - m) * s);
}

template <typename T>
void layer_norm_forward_rows(const T* x, const T* w, const T* b, double eps, T* y, int64_t rows, int64_t n) {
#pragma omp parallel for if (rows * n > kParallelElements)
  for (int64_t r = 0; r < rows; ++r) layer_norm_forward_row<T>(x + r * n, w, b, eps, y + r * n, n);
}
