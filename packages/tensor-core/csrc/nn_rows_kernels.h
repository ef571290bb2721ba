// The kernels of csrc/nn_rows_backward.cpp, included there twice: once for the x86-64 baseline and once
// under `#pragma GCC target("avx2,fma")`. No includes: the .cpp includes what they need first, and
// wide_math.h (exp_clamped, erf_wide) inside each namespace.

constexpr int64_t kParallelElements = int64_t(1) << 15;

// exp, erf and tanh of a float64 value for a result of type T: float32 results take wide_math.h's
// vectorisable versions (errors far below float32's rounding), float64 results the C library's.
template <typename T>
double exp_t(double v) {
  if constexpr (std::is_same_v<T, float>) return exp_clamped(v < -100.0 ? -100.0 : (v > 100.0 ? 100.0 : v));
  else return std::exp(v);
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

template <typename T>
double row_dot(const T* __restrict__ a, const T* __restrict__ b, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += double(a[j]) * double(b[j]);
  return s;
}

template <typename T>
double row_sum(const T* __restrict__ a, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += double(a[j]);
  return s;
}

// softmax: dx = y (g - sum(g y)); log_softmax: dx = g - exp(y) sum(g); rows of n along the last dim.
template <typename T>
void softmax_backward_rows(const T* y, const T* g, T* dx, int64_t rows, int64_t n, bool log) {
#pragma omp parallel for if (rows * n > kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const T* __restrict__ yr = y + r * n;
    const T* __restrict__ gr = g + r * n;
    T* __restrict__ out = dx + r * n;
    if (log) {
      const T s = T(row_sum(gr, n));
      for (int64_t j = 0; j < n; ++j) out[j] = gr[j] - T(exp_t<T>(double(yr[j]))) * s;
    } else {
      const T s = T(row_dot(gr, yr, n));
      for (int64_t j = 0; j < n; ++j) out[j] = yr[j] * (gr[j] - s);
    }
  }
}

// layer_norm over rows of n: xhat = (x - mean) rstd, rstd = 1 / sqrt(var + eps) (biased variance, both in
// float64); with gw = g w: dx = rstd (gw - mean(gw) - xhat mean(gw xhat)), dw = sum over rows of g xhat,
// db = sum over rows of g (float64 column sums, rows in order: the same bits on any thread count).
template <typename T>
void layer_norm_backward_rows(const T* x, const T* g, const T* w, double eps, T* dx, double* dw, double* db,
                              double* mean, double* rstd, int64_t rows, int64_t n) {
#pragma omp parallel for if (rows * n > kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const T* __restrict__ xr = x + r * n;
    const T* __restrict__ gr = g + r * n;
    const double m = row_sum(xr, n) / double(n);
    double v = 0.0;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < n; ++j) v += (double(xr[j]) - m) * (double(xr[j]) - m);
    const double s = 1.0 / std::sqrt(v / double(n) + eps);
    mean[r] = m;
    rstd[r] = s;
    if (dx == nullptr) continue;
    double a = 0.0, b = 0.0;
#pragma omp simd reduction(+ : a, b)
    for (int64_t j = 0; j < n; ++j) {
      const double gw = double(gr[j]) * (w != nullptr ? double(w[j]) : 1.0);
      a += gw;
      b += gw * (double(xr[j]) - m) * s;
    }
    a /= double(n);
    b /= double(n);
    T* __restrict__ out = dx + r * n;
    for (int64_t j = 0; j < n; ++j) {
      const double gw = double(gr[j]) * (w != nullptr ? double(w[j]) : 1.0);
      out[j] = T(s * (gw - a - (double(xr[j]) - m) * s * b));
    }
  }
  if (dw == nullptr && db == nullptr) return;
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for if (rows * n > kParallelElements)
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t lo = k * kBlock, hi = lo + kBlock < n ? lo + kBlock : n;
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
}

// gelu's gradient: exact g (Phi(x) + x phi(x)); tanh form g (0.5 (1 + t) + 0.5 x (1 - t^2) u'), with
// u = sqrt(2/pi) (x + 0.044715 x^3), t = tanh(u). float32 in float64 (erf_wide, exp_clamped).
template <typename T>
void gelu_backward_array(const T* g, const T* x, T* dx, int64_t count, bool tanh_form) {
  constexpr double kSqrtHalf = 0.70710678118654752440, kInvSqrt2Pi = 0.39894228040143267794;
  constexpr double kSqrt2OverPi = 0.79788456080286535588, kKappa = 0.044715;
#pragma omp parallel for if (count > kParallelElements) schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const double v = double(x[i]);
    double d;
    if (tanh_form) {
      const double u = kSqrt2OverPi * (v + kKappa * v * v * v);
      const double t = tanh_t<T>(u);
      d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * (kSqrt2OverPi * (1.0 + 3.0 * kKappa * v * v));
    } else {
      const double cdf = 0.5 + 0.5 * erf_t<T>(v * kSqrtHalf);
      d = cdf + v * exp_t<T>(-0.5 * v * v) * kInvSqrt2Pi;
    }
    dx[i] = T(double(g[i]) * d);
  }
}
