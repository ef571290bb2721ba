// ember._C kernels of ember/_ops/nn_conv.py: convolution (AVX-512 implicit GEMM, direct grouped),
// pooling, col2im (fold), padding, grid sampling and separable resampling (interpolate).
//
// Every kernel works on C-contiguous arrays laid out as planes: the Python
// side folds batch and channels into one leading dimension and gives 1-D and
// 2-D work a spatial shape of (1, 1, W) or (1, H, W), so one 3-D loop nest
// serves every dimensionality. Arguments were checked by the op's meta
// function; these functions check only what protects memory (dtypes, sizes).
// Planes are independent, so OpenMP splits the work over them; guided schedules
// let one thread take over the work of another that the OS has descheduled.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#ifdef EMBER_HAS_OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define EMBER_X86_SIMD 1
#endif

namespace py = pybind11;

namespace {

// Work (element visits) below which a kernel runs on one thread: a parallel region costs more.
constexpr int64_t kParallelWork = 1 << 15;

using Dims = std::vector<int64_t>;

void check_dims(const Dims& d, const char* what) {
  if (d.size() != 3) throw std::invalid_argument(std::string(what) + ": expected 3 values (depth, height, width)");
}

void check_contiguous(const py::array& a, const char* what) {
  if (!(a.flags() & py::array::c_style)) throw std::invalid_argument(std::string(what) + ": arrays must be C-contiguous");
}

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

template <typename T>
T lowest() {
  if constexpr (std::is_floating_point_v<T>) {
    return -std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::lowest();
  }
}

// ---- max pooling -------------------------------------------------------------------------
// input (P, D, H, W) -> values (P, oD, oH, oW) and, if asked, int64 flat indices into each
// input plane (d * H + h) * W + w. NaN wins and a later NaN replaces an earlier one.

// The 2 x 2 window of stride 2 (MaxPool2d(2), every U-Net and VGG stage) with no padding or dilation and
// every window inside the plane: four loads and three selects per output, no branches (the general loop's
// data-dependent branch mispredicted on about every other element: 28 ns per output on a 64 x 64 plane).
// Same answer as the general loop: the first maximum wins, and a NaN wins and a later NaN replaces it.
template <typename T>
void max_pool_2x2_typed(const T* in, T* out, int64_t* idx, int64_t P, int64_t H, int64_t W, int64_t oH, int64_t oW) {
  const int64_t in_plane = H * W, out_plane = oH * oW;
  const bool parallel = P * out_plane * 4 > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t pl = 0; pl < P; ++pl) {
    const T* x = in + pl * in_plane;
    for (int64_t oh = 0; oh < oH; ++oh) {
      const T* r0 = x + 2 * oh * W;
      const T* r1 = r0 + W;
      T* y = out + pl * out_plane + oh * oW;
      int64_t* yi = idx ? idx + pl * out_plane + oh * oW : nullptr;
      const int64_t base = 2 * oh * W;
      for (int64_t ow = 0; ow < oW; ++ow) {
        T m = r0[2 * ow];
        int64_t at = 0;
        const T candidates[3] = {r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1]};
        const int64_t offsets[3] = {1, W, W + 1};
        for (int c = 0; c < 3; ++c) {
          const T v = candidates[c];
          const bool take = v > m || is_nan(v);
          m = take ? v : m;
          at = take ? offsets[c] : at;
        }
        y[ow] = m;
        if (yi) yi[ow] = base + 2 * ow + at;
      }
    }
  }
}

template <typename T>
void max_pool_typed(const py::array& input, py::array& values, py::array* indices, const Dims& k, const Dims& s,
                    const Dims& p, const Dims& dil) {
  const int64_t P = input.shape(0), D = input.shape(1), H = input.shape(2), W = input.shape(3);
  const int64_t oD = values.shape(1), oH = values.shape(2), oW = values.shape(3);
  const T* in = static_cast<const T*>(input.data());
  T* out = static_cast<T*>(values.mutable_data());
  int64_t* idx = indices ? static_cast<int64_t*>(indices->mutable_data()) : nullptr;
  if (D == 1 && oD == 1 && k[0] == 1 && k[1] == 2 && k[2] == 2 && s[1] == 2 && s[2] == 2 && p[0] == 0 &&
      p[1] == 0 && p[2] == 0 && dil[1] == 1 && dil[2] == 1 && 2 * oH <= H && 2 * oW <= W) {
    max_pool_2x2_typed<T>(in, out, idx, P, H, W, oH, oW);
    return;
  }
  const int64_t in_plane = D * H * W, out_plane = oD * oH * oW;
  const bool parallel = P * out_plane * k[0] * k[1] * k[2] > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t pl = 0; pl < P; ++pl) {
    const T* x = in + pl * in_plane;
    T* y = out + pl * out_plane;
    int64_t* yi = idx ? idx + pl * out_plane : nullptr;
    for (int64_t od = 0; od < oD; ++od) {
      int64_t d0 = od * s[0] - p[0];
      const int64_t d1 = std::min(d0 + (k[0] - 1) * dil[0] + 1, D);
      while (d0 < 0) d0 += dil[0];
      for (int64_t oh = 0; oh < oH; ++oh) {
        int64_t h0 = oh * s[1] - p[1];
        const int64_t h1 = std::min(h0 + (k[1] - 1) * dil[1] + 1, H);
        while (h0 < 0) h0 += dil[1];
        for (int64_t ow = 0; ow < oW; ++ow) {
          int64_t w0 = ow * s[2] - p[2];
          const int64_t w1 = std::min(w0 + (k[2] - 1) * dil[2] + 1, W);
          while (w0 < 0) w0 += dil[2];
          int64_t best = (d0 * H + h0) * W + w0;
          T m = lowest<T>();
          for (int64_t d = d0; d < d1; d += dil[0])
            for (int64_t h = h0; h < h1; h += dil[1]) {
              const int64_t row = (d * H + h) * W;
              for (int64_t w = w0; w < w1; w += dil[2]) {
                const T v = x[row + w];
                if (v > m || is_nan(v)) {
                  m = v;
                  best = row + w;
                }
              }
            }
          const int64_t o = (od * oH + oh) * oW + ow;
          y[o] = m;
          if (yi) yi[o] = best;
        }
      }
    }
  }
}

#define EMBER_DISPATCH_REAL(DT, NAME, CALL)                                    \
  if (DT.is(py::dtype::of<float>())) { using scalar_t = float; CALL; }          \
  else if (DT.is(py::dtype::of<double>())) { using scalar_t = double; CALL; }   \
  else if (DT.is(py::dtype::of<int64_t>())) { using scalar_t = int64_t; CALL; } \
  else if (DT.is(py::dtype::of<int32_t>())) { using scalar_t = int32_t; CALL; } \
  else if (DT.is(py::dtype::of<int16_t>())) { using scalar_t = int16_t; CALL; } \
  else if (DT.is(py::dtype::of<int8_t>())) { using scalar_t = int8_t; CALL; }   \
  else if (DT.is(py::dtype::of<uint8_t>())) { using scalar_t = uint8_t; CALL; } \
  else throw std::invalid_argument(std::string(NAME) + ": unsupported dtype");

py::object max_pool(py::array input, Dims out_size, Dims kernel, Dims stride, Dims padding, Dims dilation,
                    bool with_indices) {
  check_contiguous(input, "max_pool");
  check_dims(out_size, "max_pool");
  check_dims(kernel, "max_pool");
  check_dims(stride, "max_pool");
  check_dims(padding, "max_pool");
  check_dims(dilation, "max_pool");
  if (input.ndim() != 4) throw std::invalid_argument("max_pool: input must be (planes, D, H, W)");
  std::vector<py::ssize_t> shape{input.shape(0), out_size[0], out_size[1], out_size[2]};
  py::array values(input.dtype(), shape);
  py::array indices = with_indices ? py::array(py::dtype::of<int64_t>(), shape) : py::array();
  {
    py::gil_scoped_release release;
    EMBER_DISPATCH_REAL(input.dtype(), "max_pool",
                        max_pool_typed<scalar_t>(input, values, with_indices ? &indices : nullptr, kernel, stride,
                                                 padding, dilation));
  }
  if (with_indices) return py::make_tuple(values, indices);
  return values;
}

// ---- average pooling ---------------------------------------------------------------------
// The divisor of a window: divisor_override when > 0, else the window's size clipped to the
// padded input (count_include_pad) or to the input. Integer sums divide truncating toward zero.

template <typename T, typename Acc>
void avg_pool_typed(const py::array& input, py::array& values, const Dims& k, const Dims& s, const Dims& p,
                    bool count_include_pad, int64_t divisor_override) {
  const int64_t P = input.shape(0), D = input.shape(1), H = input.shape(2), W = input.shape(3);
  const int64_t oD = values.shape(1), oH = values.shape(2), oW = values.shape(3);
  const T* in = static_cast<const T*>(input.data());
  T* out = static_cast<T*>(values.mutable_data());
  const int64_t in_plane = D * H * W, out_plane = oD * oH * oW;
  const bool parallel = P * out_plane * k[0] * k[1] * k[2] > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t pl = 0; pl < P; ++pl) {
    const T* x = in + pl * in_plane;
    T* y = out + pl * out_plane;
    for (int64_t od = 0; od < oD; ++od) {
      int64_t d0 = od * s[0] - p[0];
      int64_t d1 = std::min(d0 + k[0], D + p[0]);
      const int64_t pool_d = d1 - d0;
      d0 = std::max<int64_t>(d0, 0);
      d1 = std::min(d1, D);
      for (int64_t oh = 0; oh < oH; ++oh) {
        int64_t h0 = oh * s[1] - p[1];
        int64_t h1 = std::min(h0 + k[1], H + p[1]);
        const int64_t pool_h = h1 - h0;
        h0 = std::max<int64_t>(h0, 0);
        h1 = std::min(h1, H);
        for (int64_t ow = 0; ow < oW; ++ow) {
          int64_t w0 = ow * s[2] - p[2];
          int64_t w1 = std::min(w0 + k[2], W + p[2]);
          const int64_t pool_w = w1 - w0;
          w0 = std::max<int64_t>(w0, 0);
          w1 = std::min(w1, W);
          const int64_t o = (od * oH + oh) * oW + ow;
          if (d0 >= d1 || h0 >= h1 || w0 >= w1) {
            y[o] = T(0);
            continue;
          }
          Acc sum = Acc(0);
          for (int64_t d = d0; d < d1; ++d)
            for (int64_t h = h0; h < h1; ++h) {
              const T* row = x + (d * H + h) * W;
#pragma omp simd reduction(+ : sum)
              for (int64_t w = w0; w < w1; ++w) sum += Acc(row[w]);
            }
          int64_t divisor;
          if (divisor_override > 0) divisor = divisor_override;
          else if (count_include_pad) divisor = pool_d * pool_h * pool_w;
          else divisor = (d1 - d0) * (h1 - h0) * (w1 - w0);
          y[o] = static_cast<T>(sum / static_cast<Acc>(divisor));
        }
      }
    }
  }
}

py::array avg_pool(py::array input, Dims out_size, Dims kernel, Dims stride, Dims padding, bool count_include_pad,
                   int64_t divisor_override) {
  check_contiguous(input, "avg_pool");
  check_dims(out_size, "avg_pool");
  check_dims(kernel, "avg_pool");
  check_dims(stride, "avg_pool");
  check_dims(padding, "avg_pool");
  if (input.ndim() != 4) throw std::invalid_argument("avg_pool: input must be (planes, D, H, W)");
  py::array values(input.dtype(), std::vector<py::ssize_t>{input.shape(0), out_size[0], out_size[1], out_size[2]});
  auto dt = input.dtype();
  py::gil_scoped_release release;
  if (dt.is(py::dtype::of<float>()))
    avg_pool_typed<float, float>(input, values, kernel, stride, padding, count_include_pad, divisor_override);
  else if (dt.is(py::dtype::of<double>()))
    avg_pool_typed<double, double>(input, values, kernel, stride, padding, count_include_pad, divisor_override);
  else if (dt.is(py::dtype::of<int64_t>()))
    avg_pool_typed<int64_t, int64_t>(input, values, kernel, stride, padding, count_include_pad, divisor_override);
  else
    throw std::invalid_argument("avg_pool: unsupported dtype");
  return values;
}

// ---- adaptive max pooling ----------------------------------------------------------------
// Output cell i of a dimension of size n -> m covers [floor(i n / m), ceil((i + 1) n / m)).

inline int64_t adaptive_start(int64_t i, int64_t out, int64_t in) { return (i * in) / out; }
inline int64_t adaptive_end(int64_t i, int64_t out, int64_t in) { return ((i + 1) * in + out - 1) / out; }

template <typename T>
void adaptive_max_pool_typed(const py::array& input, py::array& values, py::array& indices) {
  const int64_t P = input.shape(0), D = input.shape(1), H = input.shape(2), W = input.shape(3);
  const int64_t oD = values.shape(1), oH = values.shape(2), oW = values.shape(3);
  const T* in = static_cast<const T*>(input.data());
  T* out = static_cast<T*>(values.mutable_data());
  int64_t* idx = static_cast<int64_t*>(indices.mutable_data());
  const int64_t in_plane = D * H * W, out_plane = oD * oH * oW;
  const bool parallel = P * (in_plane + out_plane) > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t pl = 0; pl < P; ++pl) {
    const T* x = in + pl * in_plane;
    for (int64_t od = 0; od < oD; ++od) {
      const int64_t d0 = adaptive_start(od, oD, D), d1 = adaptive_end(od, oD, D);
      for (int64_t oh = 0; oh < oH; ++oh) {
        const int64_t h0 = adaptive_start(oh, oH, H), h1 = adaptive_end(oh, oH, H);
        for (int64_t ow = 0; ow < oW; ++ow) {
          const int64_t w0 = adaptive_start(ow, oW, W), w1 = adaptive_end(ow, oW, W);
          int64_t best = (d0 * H + h0) * W + w0;
          T m = lowest<T>();
          for (int64_t d = d0; d < d1; ++d)
            for (int64_t h = h0; h < h1; ++h) {
              const int64_t row = (d * H + h) * W;
              for (int64_t w = w0; w < w1; ++w) {
                const T v = x[row + w];
                if (v > m || is_nan(v)) {
                  m = v;
                  best = row + w;
                }
              }
            }
          const int64_t o = pl * out_plane + (od * oH + oh) * oW + ow;
          out[o] = m;
          idx[o] = best;
        }
      }
    }
  }
}

py::tuple adaptive_max_pool(py::array input, Dims out_size) {
  check_contiguous(input, "adaptive_max_pool");
  check_dims(out_size, "adaptive_max_pool");
  if (input.ndim() != 4) throw std::invalid_argument("adaptive_max_pool: input must be (planes, D, H, W)");
  std::vector<py::ssize_t> shape{input.shape(0), out_size[0], out_size[1], out_size[2]};
  py::array values(input.dtype(), shape);
  py::array indices(py::dtype::of<int64_t>(), shape);
  {
    py::gil_scoped_release release;
    EMBER_DISPATCH_REAL(input.dtype(), "adaptive_max_pool", adaptive_max_pool_typed<scalar_t>(input, values, indices));
  }
  return py::make_tuple(values, indices);
}

// ---- adaptive average pooling ------------------------------------------------------------

// Sum of n contiguous values, vectorised for the widest instruction set the CPU has.
#ifdef EMBER_X86_SIMD
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
float sum_contiguous(const float* x, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

#ifdef EMBER_X86_SIMD
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
double sum_contiguous(const double* x, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

template <typename T>
void adaptive_avg_pool_typed(const py::array& input, py::array& values) {
  const int64_t P = input.shape(0), D = input.shape(1), H = input.shape(2), W = input.shape(3);
  const int64_t oD = values.shape(1), oH = values.shape(2), oW = values.shape(3);
  const T* in = static_cast<const T*>(input.data());
  T* out = static_cast<T*>(values.mutable_data());
  const int64_t in_plane = D * H * W, out_plane = oD * oH * oW;
  const bool parallel = P * (in_plane + out_plane) > kParallelWork;
  if (out_plane == 1) {  // global average pooling
#pragma omp parallel for schedule(guided) if (parallel)
    for (int64_t pl = 0; pl < P; ++pl) out[pl] = sum_contiguous(in + pl * in_plane, in_plane) / T(in_plane);
    return;
  }
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t pl = 0; pl < P; ++pl) {
    const T* x = in + pl * in_plane;
    for (int64_t od = 0; od < oD; ++od) {
      const int64_t d0 = adaptive_start(od, oD, D), d1 = adaptive_end(od, oD, D);
      for (int64_t oh = 0; oh < oH; ++oh) {
        const int64_t h0 = adaptive_start(oh, oH, H), h1 = adaptive_end(oh, oH, H);
        for (int64_t ow = 0; ow < oW; ++ow) {
          const int64_t w0 = adaptive_start(ow, oW, W), w1 = adaptive_end(ow, oW, W);
          T sum = T(0);
          for (int64_t d = d0; d < d1; ++d)
            for (int64_t h = h0; h < h1; ++h) {
              const T* row = x + (d * H + h) * W;
#pragma omp simd reduction(+ : sum)
              for (int64_t w = w0; w < w1; ++w) sum += row[w];
            }
          out[pl * out_plane + (od * oH + oh) * oW + ow] = sum / T((d1 - d0) * (h1 - h0) * (w1 - w0));
        }
      }
    }
  }
}

py::array adaptive_avg_pool(py::array input, Dims out_size) {
  check_contiguous(input, "adaptive_avg_pool");
  check_dims(out_size, "adaptive_avg_pool");
  if (input.ndim() != 4) throw std::invalid_argument("adaptive_avg_pool: input must be (planes, D, H, W)");
  py::array values(input.dtype(), std::vector<py::ssize_t>{input.shape(0), out_size[0], out_size[1], out_size[2]});
  auto dt = input.dtype();
  py::gil_scoped_release release;
  if (dt.is(py::dtype::of<float>())) adaptive_avg_pool_typed<float>(input, values);
  else if (dt.is(py::dtype::of<double>())) adaptive_avg_pool_typed<double>(input, values);
  else throw std::invalid_argument("adaptive_avg_pool: unsupported dtype");
  return values;
}

// ---- col2im (fold) -----------------------------------------------------------------------
// cols (B, C, kD, kH, kW, lD, lH, lW) -> image (B * C, D, H, W): every column entry is added
// at (l * stride - padding + k * dilation) when that lands inside the image.

template <typename T>
void col2im_typed(const py::array& cols, py::array& image, const Dims& k, const Dims& l, const Dims& s,
                  const Dims& p, const Dims& dil, bool parallel) {
  const int64_t planes = image.shape(0), D = image.shape(1), H = image.shape(2), W = image.shape(3);
  const int64_t K = k[0] * k[1] * k[2], L = l[0] * l[1] * l[2];
  const T* c = static_cast<const T*>(cols.data());
  T* img = static_cast<T*>(image.mutable_data());
  parallel = parallel && planes * K * L > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t pl = 0; pl < planes; ++pl) {
    T* y = img + pl * D * H * W;
    std::fill(y, y + D * H * W, T(0));
    const T* src = c + pl * K * L;
    for (int64_t kd = 0; kd < k[0]; ++kd)
      for (int64_t kh = 0; kh < k[1]; ++kh)
        for (int64_t kw = 0; kw < k[2]; ++kw) {
          const T* col = src + ((kd * k[1] + kh) * k[2] + kw) * L;
          // output positions lw whose target w = lw * s - p + kw * dil lies in [0, W)
          const int64_t offw = kw * dil[2] - p[2];
          int64_t lw0 = offw >= 0 ? 0 : (-offw + s[2] - 1) / s[2];
          int64_t lw1 = W - offw <= 0 ? 0 : std::min(l[2], (W - offw + s[2] - 1) / s[2]);
          for (int64_t ld = 0; ld < l[0]; ++ld) {
            const int64_t d = ld * s[0] - p[0] + kd * dil[0];
            if (d < 0 || d >= D) continue;
            for (int64_t lh = 0; lh < l[1]; ++lh) {
              const int64_t h = lh * s[1] - p[1] + kh * dil[1];
              if (h < 0 || h >= H) continue;
              const T* colrow = col + (ld * l[1] + lh) * l[2];
              T* row = y + (d * H + h) * W;
              if (s[2] == 1) {
                for (int64_t lw = lw0; lw < lw1; ++lw) row[lw + offw] += colrow[lw];
              } else {
                const int64_t sw = s[2];
                for (int64_t lw = lw0; lw < lw1; ++lw) row[lw * sw + offw] += colrow[lw];
              }
            }
          }
        }
  }
}

py::array col2im(py::array cols, int64_t planes, Dims image_size, Dims kernel, Dims col_size, Dims stride,
                 Dims padding, Dims dilation, bool parallel) {
  check_contiguous(cols, "col2im");
  check_dims(image_size, "col2im");
  check_dims(kernel, "col2im");
  check_dims(col_size, "col2im");
  check_dims(stride, "col2im");
  check_dims(padding, "col2im");
  check_dims(dilation, "col2im");
  const int64_t need = planes * kernel[0] * kernel[1] * kernel[2] * col_size[0] * col_size[1] * col_size[2];
  if (cols.size() != need) throw std::invalid_argument("col2im: cols has the wrong number of elements");
  py::array image(cols.dtype(), std::vector<py::ssize_t>{planes, image_size[0], image_size[1], image_size[2]});
  auto dt = cols.dtype();
  py::gil_scoped_release release;
  if (dt.is(py::dtype::of<float>()))
    col2im_typed<float>(cols, image, kernel, col_size, stride, padding, dilation, parallel);
  else if (dt.is(py::dtype::of<double>()))
    col2im_typed<double>(cols, image, kernel, col_size, stride, padding, dilation, parallel);
  else
    throw std::invalid_argument("col2im: unsupported dtype");
  return image;
}

// ---- direct grouped convolution ----------------------------------------------------------
// For depthwise and other thin-group convolutions, where im2col + GEMM wastes its time on
// copies: input (N, C, D, H, W), weight (O, C / groups, kD, kH, kW) -> (N, O, oD, oH, oW).

// One input channel per group in 2-D (depthwise, MobileNet's and EfficientNet's layers): each plane is
// copied into a zero-padded buffer, so that every tap reads a whole output row with no bounds checks, and
// the 3 x 3 stride-1 kernel sums its nine taps per output in registers. The general loop below walked every
// tap over every output row with its own bounds: on MobileNetV2's 2 x 2 and 4 x 4 planes its rows are 2-4
// long and the bookkeeping cost 9 ns a row (161 us for 480 channels of 2 x 2, PyTorch 86 us for the call).
// The taps are added in the general loop's order, each to the running sum; a padding tap adds w * 0, which
// is the skipped term's value unless w is not finite, so a channel with a non-finite weight takes the
// general loop (returns false).
template <typename T>
bool conv_depthwise_plane(const T* xin, const T* wk, T* out, T* padded, int64_t H, int64_t W, int64_t oH, int64_t oW,
                          int64_t kH, int64_t kW, const Dims& s, const Dims& p, const Dims& dil) {
  for (int64_t i = 0; i < kH * kW; ++i)
    if (!std::isfinite(static_cast<double>(wk[i]))) return false;
  const int64_t Hp = (oH - 1) * s[1] + (kH - 1) * dil[1] + 1, Wp = (oW - 1) * s[2] + (kW - 1) * dil[2] + 1;
  std::fill(padded, padded + Hp * Wp, T(0));
  for (int64_t h = std::max<int64_t>(0, -p[1]); h < H && h + p[1] < Hp; ++h) {
    const int64_t w0 = std::max<int64_t>(0, -p[2]), w1 = std::min<int64_t>(W, Wp - p[2]);
    if (w1 > w0) std::copy(xin + h * W + w0, xin + h * W + w1, padded + (h + p[1]) * Wp + w0 + p[2]);
  }
  if (kH == 3 && kW == 3 && s[1] == 1 && s[2] == 1 && dil[1] == 1 && dil[2] == 1) {
    const T w0 = wk[0], w1 = wk[1], w2 = wk[2], w3 = wk[3], w4 = wk[4], w5 = wk[5], w6 = wk[6], w7 = wk[7], w8 = wk[8];
    for (int64_t oh = 0; oh < oH; ++oh) {
      const T* r0 = padded + oh * Wp;
      const T* r1 = r0 + Wp;
      const T* r2 = r1 + Wp;
      T* orow = out + oh * oW;
      for (int64_t ow = 0; ow < oW; ++ow) {
        T acc = T(0);
        acc += w0 * r0[ow];
        acc += w1 * r0[ow + 1];
        acc += w2 * r0[ow + 2];
        acc += w3 * r1[ow];
        acc += w4 * r1[ow + 1];
        acc += w5 * r1[ow + 2];
        acc += w6 * r2[ow];
        acc += w7 * r2[ow + 1];
        acc += w8 * r2[ow + 2];
        orow[ow] = acc;
      }
    }
    return true;
  }
  std::fill(out, out + oH * oW, T(0));
  for (int64_t kh = 0; kh < kH; ++kh)
    for (int64_t kw = 0; kw < kW; ++kw) {
      const T wv = wk[kh * kW + kw];
      for (int64_t oh = 0; oh < oH; ++oh) {
        const T* __restrict__ src = padded + (oh * s[1] + kh * dil[1]) * Wp + kw * dil[2];
        T* __restrict__ orow = out + oh * oW;
        for (int64_t ow = 0; ow < oW; ++ow) orow[ow] += wv * src[ow * s[2]];
      }
    }
  return true;
}

template <typename T>
void conv_direct_typed(const py::array& input, const py::array& weight, py::array& output, const Dims& s,
                       const Dims& p, const Dims& dil, int64_t groups) {
  const int64_t N = input.shape(0), C = input.shape(1), D = input.shape(2), H = input.shape(3), W = input.shape(4);
  const int64_t O = weight.shape(0), Cg = weight.shape(1), kD = weight.shape(2), kH = weight.shape(3),
                kW = weight.shape(4);
  const int64_t oD = output.shape(2), oH = output.shape(3), oW = output.shape(4);
  const int64_t Og = O / groups;
  const T* x = static_cast<const T*>(input.data());
  const T* wt = static_cast<const T*>(weight.data());
  T* y = static_cast<T*>(output.mutable_data());
  const int64_t in_plane = D * H * W, out_plane = oD * oH * oW, K = kD * kH * kW;
  const bool parallel = N * O * out_plane * Cg * K > kParallelWork;
  // one input channel per group, 2-D: conv_depthwise_plane on a padded copy of the plane
  const bool planes_2d = Cg == 1 && D == 1 && oD == 1 && kD == 1 && p[0] == 0;
  const int64_t padded_size = planes_2d ? ((oH - 1) * s[1] + (kH - 1) * dil[1] + 1) * ((oW - 1) * s[2] + (kW - 1) * dil[2] + 1) : 0;
#pragma omp parallel if (parallel)
  {
  std::vector<T> padded(static_cast<size_t>(padded_size));
#pragma omp for schedule(guided)
  for (int64_t no = 0; no < N * O; ++no) {
    const int64_t n = no / O, o = no % O, g = o / Og;
    T* out = y + no * out_plane;
    if (planes_2d && conv_depthwise_plane<T>(x + (n * C + g) * in_plane, wt + o * K, out, padded.data(), H, W, oH,
                                             oW, kH, kW, s, p, dil))
      continue;
    std::fill(out, out + out_plane, T(0));
    for (int64_t ci = 0; ci < Cg; ++ci) {
      const T* xin = x + (n * C + g * Cg + ci) * in_plane;
      const T* wk = wt + (o * Cg + ci) * K;
      for (int64_t kd = 0; kd < kD; ++kd)
        for (int64_t kh = 0; kh < kH; ++kh)
          for (int64_t kw = 0; kw < kW; ++kw) {
            const T wv = wk[(kd * kH + kh) * kW + kw];
            const int64_t offw = kw * dil[2] - p[2];
            // output columns ow with 0 <= ow * s + offw < W
            const int64_t ow0 = offw >= 0 ? 0 : (-offw + s[2] - 1) / s[2];
            const int64_t ow1 = W - offw <= 0 ? 0 : std::min(oW, (W - offw + s[2] - 1) / s[2]);
            if (ow0 >= ow1) continue;
            for (int64_t od = 0; od < oD; ++od) {
              const int64_t d = od * s[0] - p[0] + kd * dil[0];
              if (d < 0 || d >= D) continue;
              for (int64_t oh = 0; oh < oH; ++oh) {
                const int64_t h = oh * s[1] - p[1] + kh * dil[1];
                if (h < 0 || h >= H) continue;
                const T* __restrict__ xrow = xin + (d * H + h) * W;
                T* __restrict__ orow = out + (od * oH + oh) * oW;
                if (s[2] == 1) {
                  for (int64_t ow = ow0; ow < ow1; ++ow) orow[ow] += wv * xrow[ow + offw];
                } else {
                  const int64_t sw = s[2];
                  for (int64_t ow = ow0; ow < ow1; ++ow) orow[ow] += wv * xrow[ow * sw + offw];
                }
              }
            }
          }
    }
  }
  }
}

py::array conv_direct(py::array input, py::array weight, Dims out_size, Dims stride, Dims padding, Dims dilation,
                      int64_t groups) {
  check_contiguous(input, "conv_direct");
  check_contiguous(weight, "conv_direct");
  check_dims(out_size, "conv_direct");
  check_dims(stride, "conv_direct");
  check_dims(padding, "conv_direct");
  check_dims(dilation, "conv_direct");
  if (input.ndim() != 5 || weight.ndim() != 5) throw std::invalid_argument("conv_direct: expected 5-D input and weight");
  if (!input.dtype().is(weight.dtype())) throw std::invalid_argument("conv_direct: input and weight differ in dtype");
  if (groups < 1 || input.shape(1) != weight.shape(1) * groups || weight.shape(0) % groups != 0)
    throw std::invalid_argument("conv_direct: channels do not match groups");
  py::array output(input.dtype(),
                   std::vector<py::ssize_t>{input.shape(0), weight.shape(0), out_size[0], out_size[1], out_size[2]});
  auto dt = input.dtype();
  py::gil_scoped_release release;
  if (dt.is(py::dtype::of<float>()))
    conv_direct_typed<float>(input, weight, output, stride, padding, dilation, groups);
  else if (dt.is(py::dtype::of<double>()))
    conv_direct_typed<double>(input, weight, output, stride, padding, dilation, groups);
  else
    throw std::invalid_argument("conv_direct: unsupported dtype");
  return output;
}

// ---- grid_sample (bilinear / nearest) ----------------------------------------------------
// input (N, C, D, H, W), grid (N, P, nd) with nd = 2 (x, y; D = 1) or 3 (x, y, z) normalised
// coordinates -> (N, C, P). padding_mode: 0 zeros, 1 border, 2 reflection. As PyTorch's
// grid_sampler: unnormalise, pad the coordinate, then sample (zero outside the input).

template <typename T>
T unnormalize(T c, int64_t size, bool align) {
  return align ? (c + T(1)) / T(2) * T(size - 1) : ((c + T(1)) * T(size) - T(1)) / T(2);
}

template <typename T>
T reflect_coordinate(T c, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return T(0);
  const T low = T(twice_low) / T(2);
  const T span = T(twice_high - twice_low) / T(2);
  c = std::fabs(c - low);
  const T extra = std::fmod(c, span);
  const int64_t flips = static_cast<int64_t>(std::floor(c / span));
  return flips % 2 == 0 ? extra + low : span - extra + low;
}

template <typename T>
T pad_coordinate(T c, int64_t size, int padding_mode, bool align) {
  if (padding_mode == 0 || !std::isfinite(c)) return c;
  if (padding_mode == 2) c = align ? reflect_coordinate(c, 0, 2 * (size - 1)) : reflect_coordinate(c, -1, 2 * size - 1);
  return std::min(T(size - 1), std::max(c, T(0)));
}

// floor(c) as an index, or -2 (outside) for coordinates far outside or not finite.
template <typename T>
int64_t floor_index(T c, int64_t size) {
  if (!(c > T(-2) && c < T(size + 1))) return -2;
  return static_cast<int64_t>(std::floor(c));
}

template <typename T>
void grid_sample_typed(const py::array& input, const py::array& grid, py::array& output, int mode, int padding_mode,
                       bool align, int nd) {
  const int64_t N = input.shape(0), C = input.shape(1), D = input.shape(2), H = input.shape(3), W = input.shape(4);
  const int64_t P = grid.shape(1);
  const T* x = static_cast<const T*>(input.data());
  const T* g = static_cast<const T*>(grid.data());
  T* y = static_cast<T*>(output.mutable_data());
  const int64_t plane = D * H * W;
  // 1. per sample point: the plane offsets and weights of its corners (offset -1: outside, skipped)
  const int K = mode == 1 ? 1 : (nd == 3 ? 8 : 4);
  std::vector<int64_t> offsets(static_cast<size_t>(N * P * K));
  std::vector<T> weights(static_cast<size_t>(N * P * K));
  const bool parallel_points = N * P * K > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel_points)
  for (int64_t i = 0; i < N * P; ++i) {
    const T* gp = g + i * nd;
    const T cx = pad_coordinate(unnormalize(gp[0], W, align), W, padding_mode, align);
    const T cy = pad_coordinate(unnormalize(gp[1], H, align), H, padding_mode, align);
    const T cz = nd == 3 ? pad_coordinate(unnormalize(gp[2], D, align), D, padding_mode, align) : T(0);
    int64_t* off = offsets.data() + i * K;
    T* wt = weights.data() + i * K;
    if (mode == 1) {  // nearest, ties to even
      const int64_t ix = floor_index(std::nearbyint(cx), W), iy = floor_index(std::nearbyint(cy), H),
                    iz = floor_index(std::nearbyint(cz), D);
      const bool inside = ix >= 0 && ix < W && iy >= 0 && iy < H && iz >= 0 && iz < D;
      off[0] = inside ? (iz * H + iy) * W + ix : -1;
      wt[0] = T(1);
      continue;
    }
    const int64_t x0 = floor_index(cx, W), y0 = floor_index(cy, H), z0 = nd == 3 ? floor_index(cz, D) : 0;
    const T tx = cx - T(x0), ty = cy - T(y0), tz = cz - T(z0);
    int k = 0;
    for (int dz = 0; dz < (nd == 3 ? 2 : 1); ++dz)
      for (int dy = 0; dy < 2; ++dy)
        for (int dx = 0; dx < 2; ++dx, ++k) {
          const int64_t ix = x0 + dx, iy = y0 + dy, iz = z0 + dz;
          T w = (dx ? tx : T(1) - tx) * (dy ? ty : T(1) - ty);
          if (nd == 3) w *= dz ? tz : T(1) - tz;
          const bool inside = ix >= 0 && ix < W && iy >= 0 && iy < H && iz >= 0 && iz < D;
          off[k] = inside ? (iz * H + iy) * W + ix : -1;
          wt[k] = w;
        }
  }
  // 2. per (batch, channel) plane: weighted sums of the corners, reading one plane at a time
  const bool parallel = N * C * P * K > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const int64_t n = nc / C;
    const T* xc = x + nc * plane;
    const int64_t* off = offsets.data() + n * P * K;
    const T* wt = weights.data() + n * P * K;
    T* out = y + nc * P;
    if (K == 4) {  // bilinear: corners outside the input have offset -1 and add nothing
      for (int64_t p = 0; p < P; ++p, off += 4, wt += 4) {
        if ((off[0] | off[1] | off[2] | off[3]) >= 0) {
          out[p] = xc[off[0]] * wt[0] + xc[off[1]] * wt[1] + xc[off[2]] * wt[2] + xc[off[3]] * wt[3];
        } else {
          T acc = T(0);
          for (int k = 0; k < 4; ++k)
            if (off[k] >= 0) acc += xc[off[k]] * wt[k];
          out[p] = acc;
        }
      }
      continue;
    }
    for (int64_t p = 0; p < P; ++p, off += K, wt += K) {
      T acc = T(0);
      for (int k = 0; k < K; ++k)
        if (off[k] >= 0) acc += xc[off[k]] * wt[k];
      out[p] = acc;
    }
  }
}

py::array grid_sample(py::array input, py::array grid, int mode, int padding_mode, bool align_corners) {
  check_contiguous(input, "grid_sample");
  check_contiguous(grid, "grid_sample");
  if (input.ndim() != 5 || grid.ndim() != 3) throw std::invalid_argument("grid_sample: expected (N, C, D, H, W) and (N, P, nd)");
  const int nd = static_cast<int>(grid.shape(2));
  if (grid.shape(0) != input.shape(0) || (nd != 2 && nd != 3) || (nd == 2 && input.shape(2) != 1))
    throw std::invalid_argument("grid_sample: grid does not match input");
  if (!input.dtype().is(grid.dtype())) throw std::invalid_argument("grid_sample: input and grid differ in dtype");
  if (mode != 0 && mode != 1) throw std::invalid_argument("grid_sample: mode must be 0 (bilinear) or 1 (nearest)");
  if (padding_mode < 0 || padding_mode > 2) throw std::invalid_argument("grid_sample: padding_mode must be 0, 1 or 2");
  py::array output(input.dtype(), std::vector<py::ssize_t>{input.shape(0), input.shape(1), grid.shape(1)});
  auto dt = input.dtype();
  py::gil_scoped_release release;
  if (dt.is(py::dtype::of<float>()))
    grid_sample_typed<float>(input, grid, output, mode, padding_mode, align_corners, nd);
  else if (dt.is(py::dtype::of<double>()))
    grid_sample_typed<double>(input, grid, output, mode, padding_mode, align_corners, nd);
  else
    throw std::invalid_argument("grid_sample: unsupported dtype");
  return output;
}

// ---- float32 convolution, AVX-512 ------------------------------------------------------
// An implicit GEMM: no im2col. The Python side zero-pads the input and splits it into its
// stride phases, (N, C, SD * SH * SW, Dq, Hq, Wq) with phase (a, b, c) holding the padded
// elements (q * S + phase) of each dim, so that for every stride an output row (od, oh, all
// ow) reads, for each kernel tap, one contiguous input row of a phase. A tile of MR output
// channels x 16 * NV output columns lives in registers; each tap adds NV vector loads times MR
// broadcast weights. Weights are packed so that the MR weights of one tap are adjacent.
// Small images, where the flat grid's dropped columns cost most, use conv_oc_avx512 (the tile
// turned around: output positions x output channels); depthwise convolutions (one input
// channel per group) use conv_dw_avx512. conv_avx512 picks among them by an estimate of cost.
// Compiled for AVX-512 and used only when the CPU has it (ember._C.conv_fast_available()).

bool cpu_has_avx512() {
#ifdef EMBER_X86_SIMD
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

struct ConvGeometry {
  int64_t N, C, S, Dq, Hq, Wq;  // phase-split input
  int64_t O, G, KD, KH, KW;     // weight (O, C / G, KD, KH, KW)
  int64_t OD, OH, OW;           // output
  std::vector<int64_t> offsets;  // per tap (c, kd, kh, kw): input offset from the output row start

  int64_t channel_stride() const { return S * Dq * Hq * Wq; }
};

ConvGeometry conv_geometry(const py::array& input, const py::array& weight, int64_t groups, const Dims& stride,
                           const Dims& dilation, const Dims& out) {
  ConvGeometry g;
  g.N = input.shape(0), g.C = input.shape(1), g.S = input.shape(2), g.Dq = input.shape(3), g.Hq = input.shape(4),
  g.Wq = input.shape(5);
  g.O = weight.shape(0), g.G = groups, g.KD = weight.shape(2), g.KH = weight.shape(3), g.KW = weight.shape(4);
  g.OD = out[0], g.OH = out[1], g.OW = out[2];
  if (groups < 1 || g.C != weight.shape(1) * groups || g.O % groups != 0)
    throw std::invalid_argument("conv_avx512: channels do not match groups");
  if (g.S != stride[0] * stride[1] * stride[2]) throw std::invalid_argument("conv_avx512: input is not split by stride");
  for (int i = 0; i < 3; ++i) {
    const int64_t k = weight.shape(2 + i), q = input.shape(3 + i);
    if (stride[i] < 1 || dilation[i] < 1 || out[i] < 1 || (out[i] - 1) + (dilation[i] * (k - 1)) / stride[i] >= q)
      throw std::invalid_argument("conv_avx512: output size does not fit the input");
  }
  const int64_t Cg = g.C / groups, plane = g.Dq * g.Hq * g.Wq;
  g.offsets.resize(static_cast<size_t>(Cg * g.KD * g.KH * g.KW));
  int64_t i = 0;
  for (int64_t c = 0; c < Cg; ++c)
    for (int64_t kd = 0; kd < g.KD; ++kd)
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw, ++i) {
          const int64_t ed = kd * dilation[0], eh = kh * dilation[1], ew = kw * dilation[2];
          const int64_t phase = ((ed % stride[0]) * stride[1] + eh % stride[1]) * stride[2] + ew % stride[2];
          g.offsets[i] = c * g.channel_stride() + phase * plane +
                         ((ed / stride[0]) * g.Hq + eh / stride[1]) * g.Wq + ew / stride[2];
        }
  return g;
}

#ifdef EMBER_X86_SIMD
inline __mmask16 lane_mask(int64_t lanes) {
  return lanes >= 16 ? __mmask16(0xFFFF) : lanes <= 0 ? __mmask16(0) : __mmask16((1u << lanes) - 1);
}

// Output positions are walked on the flat grid of a phase image, p = (od * Hq + oh) * Wq + ow,
// which input taps read contiguously; positions with oh >= OH or ow >= OW are computed and
// dropped. valid_before(p) counts the kept positions before p: where p's kept lanes go.
struct FlatGrid {
  int64_t Hq, Wq, OH, OW;
  bool dense() const { return Hq == OH && Wq == OW; }  // every position is an output
  int64_t valid_before(int64_t p) const {
    if (dense()) return p;
    const int64_t slab = Hq * Wq, od = p / slab, r = p % slab, oh = r / Wq, ow = r % Wq;
    return od * OH * OW + std::min(oh, OH) * OW + (oh < OH ? std::min(ow, OW) : 0);
  }
  __mmask16 kept(int64_t p, int64_t end) const {  // lanes p + i < end that are real outputs
    if (dense()) return lane_mask(end - p);
    unsigned m = 0;
    int64_t r = p % (Hq * Wq), oh = r / Wq, ow = r % Wq;
    for (int i = 0; i < 16 && p + i < end; ++i) {
      if (oh < OH && ow < OW) m |= 1u << i;
      if (++ow == Wq) ow = 0, oh = oh + 1 == Hq ? 0 : oh + 1;
    }
    return __mmask16(m);
  }
};

// Store the kept lanes of v contiguously at out (compress, then a masked store: Zen's
// compress-to-memory is slow); returns how many were stored.
__attribute__((target("avx512f"))) inline int64_t store_kept(float* out, __mmask16 keep, __m512 v) {
  if (keep == 0xFFFF) {
    _mm512_storeu_ps(out, v);
    return 16;
  }
  const int count = __builtin_popcount(keep);
  _mm512_mask_storeu_ps(out, __mmask16((1u << count) - 1), _mm512_maskz_compress_ps(keep, v));
  return count;
}

template <int MR, int NV>
__attribute__((target("avx512f"))) void conv_avx512_typed(const float* x, const float* wp, const float* bias,
                                                           float* y, const ConvGeometry& geo) {
  const int64_t Cg = geo.C / geo.G, Og = geo.O / geo.G, OB = (Og + MR - 1) / MR;
  const int64_t taps = static_cast<int64_t>(geo.offsets.size());
  const int64_t plane = geo.OD * geo.OH * geo.OW;
  const FlatGrid grid{geo.Hq, geo.Wq, geo.OH, geo.OW};
  const int64_t L = ((geo.OD - 1) * geo.Hq + geo.OH - 1) * geo.Wq + geo.OW;  // flat positions spanned
  constexpr int64_t NR = 16 * NV;
  const int64_t tiles = (L + NR - 1) / NR;
  const int64_t* off = geo.offsets.data();
  const int64_t tasks = geo.N * geo.G * OB * tiles;
  const bool parallel = tasks > 1 && tasks * taps * NR * MR > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t tile = t % tiles, rest = t / tiles;
    const int64_t ob = rest % OB, g = (rest / OB) % geo.G, n = rest / OB / geo.G;
    const float* wk = wp + (g * OB + ob) * taps * MR;
    const int64_t o0 = g * Og + ob * MR;
    const int64_t mr = std::min<int64_t>(MR, Og - ob * MR);
    const int64_t p0 = tile * NR;
    const float* base = x + (n * geo.C + g * Cg) * geo.channel_stride() + p0;
    __mmask16 load[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) load[v] = lane_mask(L - p0 - 16 * v);
    __m512 acc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 b0 = _mm512_set1_ps(bias != nullptr && r < mr ? bias[o0 + r] : 0.0f);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = b0;
    }
    for (int64_t tap = 0; tap < taps; ++tap, wk += MR) {
      const float* src = base + off[tap];
      __m512 in[NV];
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) in[v] = _mm512_maskz_loadu_ps(load[v], src + 16 * v);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512 wv = _mm512_set1_ps(wk[r]);
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(wv, in[v], acc[r][v]);
      }
    }
    float* out = y + (n * geo.O + o0) * plane + grid.valid_before(p0);
    __mmask16 keep[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) keep[v] = grid.kept(p0 + 16 * v, L);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      if (r < mr) {
        float* o = out + r * plane;
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) o += store_kept(o, keep[v], acc[r][v]);
      }
    }
  }
}

// The same convolution with the register tile turned around, for small images: MR output positions
// x 16 * NV output channels, each tap adding NV vector loads of weights (packed output channels
// last) times MR broadcasts of the input. Every lane is a real output channel where the group's
// output channels are a multiple of 16, whereas the flat grid above computes and drops the
// positions past each row's end (a fifth of them on an 8x8 image padded by 1). The tile goes out
// through a small buffer, one contiguous run of MR positions per output channel.
template <int MR, int NV>
__attribute__((target("avx512f"))) void conv_oc_avx512(const float* x, const float* wp, const float* bp, float* y,
                                                       const ConvGeometry& geo) {
  constexpr int64_t NR = 16 * NV;
  const int64_t Cg = geo.C / geo.G, Og = geo.O / geo.G, OB = (Og + NR - 1) / NR;
  const int64_t taps = static_cast<int64_t>(geo.offsets.size());
  const int64_t P = geo.OD * geo.OH * geo.OW, PT = (P + MR - 1) / MR;
  const int64_t* off = geo.offsets.data();
  const int64_t tasks = geo.G * OB * geo.N * PT;
  const bool parallel = tasks > 1 && tasks * taps * NR * MR > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t pt = t % PT, n = (t / PT) % geo.N, gob = t / PT / geo.N, g = gob / OB, ob = gob % OB;
    const float* wk = wp + gob * taps * NR;
    const float* xs = x + (n * geo.C + g * Cg) * geo.channel_stride();
    const float* xr[MR];
    const int64_t q0 = pt * MR, rows = std::min<int64_t>(MR, P - q0);
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      const int64_t q = q0 + std::min<int64_t>(r, rows - 1), ow = q % geo.OW, rest = q / geo.OW;
      xr[r] = xs + ((rest / geo.OH) * geo.Hq + rest % geo.OH) * geo.Wq + ow;
    }
    __m512 acc[MR][NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __m512 b0 = _mm512_loadu_ps(bp + gob * NR + 16 * v);
#pragma GCC unroll 12
      for (int r = 0; r < MR; ++r) acc[r][v] = b0;
    }
    for (int64_t tap = 0; tap < taps; ++tap, wk += NR) {
      const int64_t o_ = off[tap];
      __m512 wv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) wv[v] = _mm512_loadu_ps(wk + 16 * v);
#pragma GCC unroll 12
      for (int r = 0; r < MR; ++r) {
        const __m512 xv = _mm512_set1_ps(xr[r][o_]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(wv[v], xv, acc[r][v]);
      }
    }
    alignas(64) float buf[MR][NR];
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) _mm512_store_ps(&buf[r][16 * v], acc[r][v]);
    const int64_t width = std::min<int64_t>(NR, Og - ob * NR);
    float* out = y + (n * geo.O + g * Og + ob * NR) * P + q0;
    for (int64_t j = 0; j < width; ++j, out += P)
      for (int64_t r = 0; r < rows; ++r) out[r] = buf[r][j];
  }
}

// One input channel per group: output channel o reads input channel o / (O / C).
__attribute__((target("avx512f"))) void conv_dw_avx512(const float* x, const float* w, const float* bias, float* y,
                                                        const ConvGeometry& geo) {
  const int64_t mult = geo.O / geo.C;
  const int64_t taps = static_cast<int64_t>(geo.offsets.size());
  const int64_t OD = geo.OD, OH = geo.OH, OW = geo.OW;
  const int64_t* off = geo.offsets.data();
  const int64_t tasks = geo.N * geo.O * OD * OH;
  const bool parallel = tasks > 1 && tasks * taps * OW > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t t = 0; t < tasks; ++t) {
    int64_t rest = t;
    const int64_t oh = rest % OH;
    rest /= OH;
    const int64_t od = rest % OD;
    rest /= OD;
    const int64_t o = rest % geo.O, n = rest / geo.O;
    const float* xrow = x + (n * geo.C + o / mult) * geo.channel_stride() + (od * geo.Hq + oh) * geo.Wq;
    float* yrow = y + ((n * geo.O + o) * OD + od) * OH * OW + oh * OW;
    const float* wk = w + o * taps;
    const __m512 b0 = _mm512_set1_ps(bias != nullptr ? bias[o] : 0.0f);
    for (int64_t ow0 = 0; ow0 < OW; ow0 += 64) {
      const __mmask16 m0 = lane_mask(OW - ow0), m1 = lane_mask(OW - ow0 - 16), m2 = lane_mask(OW - ow0 - 32),
                      m3 = lane_mask(OW - ow0 - 48);
      __m512 a0 = b0, a1 = b0, a2 = b0, a3 = b0;
      const float* base = xrow + ow0;
      for (int64_t tap = 0; tap < taps; ++tap) {
        const float* src = base + off[tap];
        const __m512 wv = _mm512_set1_ps(wk[tap]);
        a0 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m0, src), a0);
        if (m1) a1 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m1, src + 16), a1);
        if (m2) a2 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m2, src + 32), a2);
        if (m3) a3 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m3, src + 48), a3);
      }
      _mm512_mask_storeu_ps(yrow + ow0, m0, a0);
      _mm512_mask_storeu_ps(yrow + ow0 + 16, m1, a1);
      _mm512_mask_storeu_ps(yrow + ow0 + 32, m2, a2);
      _mm512_mask_storeu_ps(yrow + ow0 + 48, m3, a3);
    }
  }
}
#endif

// weights (O, Cg, KD, KH, KW) -> [G][OB][Cg][KD][KH][KW][MR], zero past each group's last channel
std::vector<float> pack_weights(const float* w, int64_t O, int64_t G, int64_t Cg, int64_t K, int64_t MR) {
  const int64_t Og = O / G, OB = (Og + MR - 1) / MR;
  std::vector<float> packed(static_cast<size_t>(G * OB * Cg * K * MR), 0.0f);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t ob = 0; ob < OB; ++ob)
      for (int64_t r = 0; r < MR && ob * MR + r < Og; ++r) {
        const float* src = w + (g * Og + ob * MR + r) * Cg * K;
        float* dst = packed.data() + (g * OB + ob) * Cg * K * MR + r;
        for (int64_t ck = 0; ck < Cg * K; ++ck) dst[ck * MR] = src[ck];
      }
  return packed;
}

py::array conv_avx512(py::array_t<float, py::array::c_style> input, py::array_t<float, py::array::c_style> weight,
                      py::object bias, int64_t groups, Dims stride, Dims dilation, Dims out_size, int variant) {
  check_dims(stride, "conv_avx512");
  check_dims(dilation, "conv_avx512");
  check_dims(out_size, "conv_avx512");
  if (input.ndim() != 6 || weight.ndim() != 5)
    throw std::invalid_argument("conv_avx512: expected input (N, C, S, Dq, Hq, Wq) and weight (O, C/G, kD, kH, kW)");
  const ConvGeometry geo = conv_geometry(input, weight, groups, stride, dilation, out_size);
  py::array_t<float> b;
  if (!bias.is_none()) {
    b = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(bias);
    if (!b || b.ndim() != 1 || b.shape(0) != geo.O) throw std::invalid_argument("conv_avx512: bias must be (O,)");
  }
  py::array_t<float> output(std::vector<py::ssize_t>{geo.N, geo.O, geo.OD, geo.OH, geo.OW});
#ifdef EMBER_X86_SIMD
  if (!cpu_has_avx512()) throw std::runtime_error("conv_avx512: this CPU lacks AVX-512");
  const float* bp = bias.is_none() ? nullptr : b.data();
  const int64_t Cg = geo.C / groups, K = geo.KD * geo.KH * geo.KW, Og = geo.O / groups;
  const int64_t L = ((geo.OD - 1) * geo.Hq + geo.OH - 1) * geo.Wq + geo.OW;
  const int64_t P = geo.OD * geo.OH * geo.OW;
  // Costs per image and group, in lane-FMAs: the FMAs on padding channels and lanes plus half a cycle
  // per load or broadcast, and for the tile along output channels 16 per output for its transposed
  // store; the flat-grid kernel's 1.15 is measured (it rereads a large image's channels per tile).
  // Variants 1-4 force a flat-grid tile, 5-8 a tile along output channels (tests and benchmarks).
  // Tiles along output channels: MR positions x 16 * NV channels ({6, 4} and {8, 3} measured slower).
  static const int oc_tiles[4][2] = {{8, 2}, {8, 1}, {6, 4}, {8, 3}};
  int oc_best = 0;
  double oc_cost = 1e300;
  for (int i = 0; i < 4; ++i) {
    const int64_t mr = oc_tiles[i][0], nv = oc_tiles[i][1], nr = 16 * nv;
    const double cost = double((Og + nr - 1) / nr * nr) * double((P + mr - 1) / mr * mr) *
                        (double(K * Cg) * (1.0 + 0.5 * double(nv + mr) / double(mr * nv)) + 16.0);
    if (variant == 0 ? i < 2 && cost < oc_cost : variant == i + 5) oc_best = i, oc_cost = cost;
  }
  // flat-grid tiles: MR output channels x 16 * NV columns of the flat grid
  static const int tiles[4][2] = {{12, 2}, {16, 1}, {8, 3}, {8, 2}};
  int best = 0;
  double best_cost = 1e300;
  for (int i = 0; i < 4; ++i) {
    const int64_t mr = tiles[i][0], nv = tiles[i][1], nr = 16 * nv;
    const double cost = 1.15 * double((Og + mr - 1) / mr * mr) * double((L + nr - 1) / nr * nr) * double(K * Cg) *
                        (1.0 + 0.5 * double(nv + mr) / double(mr * nv));
    if (variant == 0 ? cost < best_cost : variant == i + 1) best = i, best_cost = cost;
  }
  // the depthwise kernel (one input channel per group): one output row at a time, 16 columns a vector
  const double dw_cost = double(Og) * double(geo.OD * geo.OH) * (double((geo.OW + 15) / 16 * 16) * double(K) * 1.5 + 64.0);
  const bool use_oc = variant == 0 ? oc_cost < (Cg == 1 ? dw_cost : best_cost) : variant >= 5;
  if (use_oc) {
    const int64_t nr = 16 * oc_tiles[oc_best][1], OB = (Og + nr - 1) / nr;
    // weights -> [G][OB][Cg * K][nr] and bias -> [G][OB][nr], zero past each group's last channel
    std::vector<float> packed(static_cast<size_t>(groups * OB * Cg * K * nr), 0.0f);
    std::vector<float> bias_packed(static_cast<size_t>(groups * OB * nr), 0.0f);
    const float* w = weight.data();
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t o = 0; o < Og; ++o) {
        float* dst = packed.data() + ((g * OB + o / nr) * Cg * K) * nr + o % nr;
        const float* src = w + (g * Og + o) * Cg * K;
        for (int64_t ck = 0; ck < Cg * K; ++ck) dst[ck * nr] = src[ck];
        if (bp) bias_packed[(g * OB + o / nr) * nr + o % nr] = bp[g * Og + o];
      }
    py::gil_scoped_release release;
    const float* xp = input.data();
    float* yp = output.mutable_data();
    if (oc_best == 0) conv_oc_avx512<8, 2>(xp, packed.data(), bias_packed.data(), yp, geo);
    else if (oc_best == 1) conv_oc_avx512<8, 1>(xp, packed.data(), bias_packed.data(), yp, geo);
    else if (oc_best == 2) conv_oc_avx512<6, 4>(xp, packed.data(), bias_packed.data(), yp, geo);
    else conv_oc_avx512<8, 3>(xp, packed.data(), bias_packed.data(), yp, geo);
  } else if (Cg == 1) {
    py::gil_scoped_release release;
    conv_dw_avx512(input.data(), weight.data(), bp, output.mutable_data(), geo);
  } else {
    std::vector<float> packed = pack_weights(weight.data(), geo.O, groups, Cg, K, tiles[best][0]);
    py::gil_scoped_release release;
    float* yp = output.mutable_data();
    if (best == 0) conv_avx512_typed<12, 2>(input.data(), packed.data(), bp, yp, geo);
    else if (best == 1) conv_avx512_typed<16, 1>(input.data(), packed.data(), bp, yp, geo);
    else if (best == 2) conv_avx512_typed<8, 3>(input.data(), packed.data(), bp, yp, geo);
    else conv_avx512_typed<8, 2>(input.data(), packed.data(), bp, yp, geo);
  }
#else
  throw std::runtime_error("conv_avx512: built without x86 SIMD support");
#endif
  return output;
}

// ---- float32 convolution, AVX2 ------------------------------------------------------------
// conv_oc_avx512's tile for CPUs with AVX2 and FMA but no AVX-512 (Zen 1-3, older Intel): MR output
// positions x 8 * NV output channels in registers, each kernel tap adding NV vector loads of weights
// (packed output channels last) times MR broadcasts of the input, read from the zero-padded input
// split into stride phases (the layout of conv_avx512), so there is no im2col copy. Every lane is a
// real output channel where the group's output channels are a multiple of 8 * NV; the tile goes out
// through a small buffer. A tile's rows run on across images, so a weight gradient's 3 x 3 outputs
// waste no rows. OpenMP takes (group, channel block, row tile) tasks; a small convolution stays on
// one thread.

bool cpu_has_avx2() {
#ifdef EMBER_X86_SIMD
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

#ifdef EMBER_X86_SIMD
template <int MR, int NV>
__attribute__((target("avx2,fma"))) void conv_oc_avx2(const float* x, const float* wp, const float* bp, float* y,
                                                      const ConvGeometry& geo) {
  constexpr int64_t NR = 8 * NV;
  const int64_t Cg = geo.C / geo.G, Og = geo.O / geo.G, OB = (Og + NR - 1) / NR;
  const int64_t taps = static_cast<int64_t>(geo.offsets.size());
  // A tile's MR rows are MR consecutive (image, position) pairs of the whole batch, so that only the
  // batch's last tile has rows to spare: a weight gradient's few positions (3 x 3) fill whole tiles.
  const int64_t P = geo.OD * geo.OH * geo.OW, NP = geo.N * P, PT = (NP + MR - 1) / MR;
  const int64_t* off = geo.offsets.data();
  const int64_t tasks = geo.G * OB * PT;
  const bool parallel = tasks > 1 && tasks * taps * NR * MR > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t pt = t % PT, gob = t / PT, g = gob / OB, ob = gob % OB;
    const float* wk = wp + gob * taps * NR;
    const float* xr[MR];
    float* yr[MR];
    const int64_t f0 = pt * MR, rows = std::min<int64_t>(MR, NP - f0);
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r) {
      // rows past the batch's last position repeat it (computed, never stored)
      const int64_t f = f0 + std::min<int64_t>(r, rows - 1), n = f / P, q = f % P;
      const int64_t ow = q % geo.OW, rest = q / geo.OW;
      xr[r] = x + (n * geo.C + g * Cg) * geo.channel_stride() + ((rest / geo.OH) * geo.Hq + rest % geo.OH) * geo.Wq + ow;
      yr[r] = y + (n * geo.O + g * Og + ob * NR) * P + q;
    }
    __m256 acc[MR][NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      const __m256 b0 = _mm256_loadu_ps(bp + gob * NR + 8 * v);
#pragma GCC unroll 12
      for (int r = 0; r < MR; ++r) acc[r][v] = b0;
    }
    for (int64_t tap = 0; tap < taps; ++tap, wk += NR) {
      const int64_t o_ = off[tap];
      __m256 wv[NV];
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) wv[v] = _mm256_loadu_ps(wk + 8 * v);
#pragma GCC unroll 12
      for (int r = 0; r < MR; ++r) {
        const __m256 xv = _mm256_broadcast_ss(xr[r] + o_);
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(wv[v], xv, acc[r][v]);
      }
    }
    alignas(32) float buf[MR][NR];
#pragma GCC unroll 12
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) _mm256_store_ps(&buf[r][8 * v], acc[r][v]);
    const int64_t width = std::min<int64_t>(NR, Og - ob * NR);
    // channel by channel: the rows of one image are a contiguous run of an output plane
    for (int64_t j = 0; j < width; ++j)
      for (int64_t r = 0; r < rows; ++r) yr[r][j * P] = buf[r][j];
  }
}
#endif

py::array conv_avx2(py::array_t<float, py::array::c_style> input, py::array_t<float> weight, py::object bias,
                    int64_t groups, Dims stride, Dims dilation, Dims out_size, int variant) {
  check_dims(stride, "conv_avx2");
  check_dims(dilation, "conv_avx2");
  check_dims(out_size, "conv_avx2");
  if (input.ndim() != 6 || weight.ndim() != 5)
    throw std::invalid_argument("conv_avx2: expected input (N, C, S, Dq, Hq, Wq) and weight (O, C/G, kD, kH, kW)");
  const ConvGeometry geo = conv_geometry(input, weight, groups, stride, dilation, out_size);
  py::array_t<float> b;
  if (!bias.is_none()) {
    b = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(bias);
    if (!b || b.ndim() != 1 || b.shape(0) != geo.O) throw std::invalid_argument("conv_avx2: bias must be (O,)");
  }
  py::array_t<float> output(std::vector<py::ssize_t>{geo.N, geo.O, geo.OD, geo.OH, geo.OW});
#ifdef EMBER_X86_SIMD
  if (!cpu_has_avx2()) throw std::runtime_error("conv_avx2: this CPU lacks AVX2/FMA");
  const float* bp = bias.is_none() ? nullptr : b.data();
  const int64_t Cg = geo.C / groups, K = geo.KD * geo.KH * geo.KW, Og = geo.O / groups;
  const int64_t P = geo.OD * geo.OH * geo.OW;
  // Tiles: MR positions x 8 * NV channels (13 to 16 of the 16 ymm registers). Cost per image and group in
  // lane-FMAs, padding lanes and rows included, plus half a cycle per weight load or input broadcast and
  // 8 per output for the transposed store. variant 1-3 forces a tile (tests).
  static const int tiles[3][2] = {{6, 2}, {12, 1}, {3, 3}};
  int best = 0;
  double best_cost = 1e300;
  for (int i = 0; i < 3; ++i) {
    const int64_t mr = tiles[i][0], nv = tiles[i][1], nr = 8 * nv;
    const double cost = double((Og + nr - 1) / nr * nr) * double((geo.N * P + mr - 1) / mr * mr) *
                        (double(K * Cg) * (1.0 + 0.5 * double(nv + mr) / double(mr * nv)) + 8.0);
    if (variant == 0 ? cost < best_cost : variant == i + 1) best = i, best_cost = cost;
  }
  const int64_t nr = 8 * tiles[best][1], OB = (Og + nr - 1) / nr;
  // weights -> [G][OB][Cg * K][nr] and bias -> [G][OB][nr], zero past each group's last channel. The
  // weight may be strided (a weight gradient's kernel is the output gradient, batch and channels swapped):
  // packing reads it in place, one (group, channel block) per task. The packed rows are written in order
  // (the nr channels of one (c, k) side by side, read from nr streams that each advance by one element), and
  // the buffer is not zeroed first: a 128 x 128 x 3 x 3 weight packed channel by channel, every store a new
  // cache line of a 590 KB buffer, cost 230 us, twice the 4 x 4 convolution it fed.
  const int64_t CK = Cg * K;
  // one buffer per thread, kept between calls (up to 16 MB): a fresh one of this size is a fresh mapping
  // from the OS, and its first touch of every page cost as much as the packing
  const size_t packed_size = static_cast<size_t>(groups * OB * CK * nr);
  constexpr size_t kKeptPacking = size_t(1) << 22;
  static thread_local std::vector<float> kept;
  std::vector<float> once;
  std::vector<float>& packed = packed_size <= kKeptPacking ? kept : once;
  if (packed.size() < packed_size) packed.resize(packed_size);
  std::vector<float> bias_packed(static_cast<size_t>(groups * OB * nr), 0.0f);
  for (int64_t o = 0; bp && o < geo.O; ++o) bias_packed[(o / Og * OB + o % Og / nr) * nr + o % Og % nr] = bp[o];
  const float* w = weight.data();
  int64_t ws[5];
  for (int i = 0; i < 5; ++i) {
    if (weight.strides(i) % static_cast<py::ssize_t>(sizeof(float)) != 0)
      throw std::invalid_argument("conv_avx2: weight strides must be whole elements");
    ws[i] = weight.strides(i) / static_cast<int64_t>(sizeof(float));
  }
  // the element offset of row (c, kd, kh, kw) of an output channel's weights, for every row
  std::vector<int64_t> row_offset(static_cast<size_t>(CK));
  {
    int64_t i = 0;
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t kd = 0; kd < geo.KD; ++kd)
        for (int64_t kh = 0; kh < geo.KH; ++kh)
          for (int64_t kw = 0; kw < geo.KW; ++kw) row_offset[i++] = c * ws[1] + kd * ws[2] + kh * ws[3] + kw * ws[4];
  }
  py::gil_scoped_release release;
  const int64_t blocks = groups * OB;
  float* const packed_data = packed.data();
  const int64_t* const rows_at = row_offset.data();
#pragma omp parallel for schedule(static) if (blocks > 1 && blocks * CK * nr > kParallelWork)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t g = blk / OB, ob = blk % OB, width = std::min<int64_t>(nr, Og - ob * nr);
    float* dst = packed_data + blk * CK * nr;
    const float* src = w + (g * Og + ob * nr) * ws[0];
    if (width == nr && nr == 16) {
      // the common full block: a fixed trip count the compiler unrolls into 16 gathered loads
      for (int64_t r = 0; r < CK; ++r, dst += 16) {
        const float* s = src + rows_at[r];
        for (int64_t j = 0; j < 16; ++j) dst[j] = s[j * ws[0]];
      }
    } else {
      for (int64_t r = 0; r < CK; ++r, dst += nr) {
        const float* s = src + rows_at[r];
        int64_t j = 0;
        for (; j < width; ++j) dst[j] = s[j * ws[0]];
        for (; j < nr; ++j) dst[j] = 0.0f;  // lanes past the group's last channel
      }
    }
  }
  const float* xp = input.data();
  float* yp = output.mutable_data();
  if (best == 0) conv_oc_avx2<6, 2>(xp, packed_data, bias_packed.data(), yp, geo);
  else if (best == 1) conv_oc_avx2<12, 1>(xp, packed_data, bias_packed.data(), yp, geo);
  else conv_oc_avx2<3, 3>(xp, packed_data, bias_packed.data(), yp, geo);
#else
  throw std::runtime_error("conv_avx2: built without x86 SIMD support");
#endif
  return output;
}

// ---- convolution weight gradient, AVX-512 --------------------------------------------------
// dW[o, c, k] = sum_n sum_p gy[n, o, p] * x[n, c, p * stride + k * dilation] over the zero-padded
// input x: the weight gradient of y = conv(x, W), a (O x C K) product reduced over the N P
// output positions. Its outputs are few and its reduction long, so the register tile runs along
// the output channels: MR rows (c, k) x 16 * NV output channels (8 * NV for float64) of
// accumulators, each output position adding NV vector loads of gy times MR broadcasts of x.
// x is the forward's input, phase-split by the stride as for conv_avx512, so that the rows of a
// tap read a contiguous run of a phase image; gy is repacked output channels last, in blocks of
// the tile's width and zero past each group's last channel, so its loads need no mask. Rows past
// C K repeat row 0 and land in padding that is dropped. The batch is walked in slices small
// enough for a slice of gy to stay in cache while every tile of a panel reads it; OpenMP takes
// whole panels (tiles, all of the batch), so no thread waits on another between slices.

#ifdef EMBER_X86_SIMD
template <typename T>
struct Simd;

template <>
struct Simd<float> {
  using V = __m512;
  static constexpr int W = 16;
  __attribute__((target("avx512f"), always_inline)) static V zero() { return _mm512_setzero_ps(); }
  __attribute__((target("avx512f"), always_inline)) static V load(const float* p) { return _mm512_loadu_ps(p); }
  __attribute__((target("avx512f"), always_inline)) static V bcast(const float* p) { return _mm512_set1_ps(*p); }
  __attribute__((target("avx512f"), always_inline)) static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  __attribute__((target("avx512f"), always_inline)) static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
};

template <>
struct Simd<double> {
  using V = __m512d;
  static constexpr int W = 8;
  __attribute__((target("avx512f"), always_inline)) static V zero() { return _mm512_setzero_pd(); }
  __attribute__((target("avx512f"), always_inline)) static V load(const double* p) { return _mm512_loadu_pd(p); }
  __attribute__((target("avx512f"), always_inline)) static V bcast(const double* p) { return _mm512_set1_pd(*p); }
  __attribute__((target("avx512f"), always_inline)) static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  __attribute__((target("avx512f"), always_inline)) static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
};

struct WGradPlan {
  int64_t Cg, Og, K, CK, CKpad, OB, OW_pad;  // OW_pad: output channels per group, padded to whole tiles
  int64_t P, tiles, panels, slice;           // gy positions per sample, row tiles, panels, samples per slice
};

// One panel of row tiles [t0, t1) of group g and output-channel block ob, over the whole batch.
template <typename T, int MR, int NV>
__attribute__((target("avx512f"))) void wgrad_panel(const T* x, const T* gp, T* dwt, const ConvGeometry& geo,
                                                     const WGradPlan& pl, const int64_t* off, int64_t g, int64_t ob,
                                                     int64_t t0, int64_t t1) {
  using S = Simd<T>;
  constexpr int64_t NR = S::W * NV;
  const int64_t N = geo.N, Hq = geo.Hq, Wq = geo.Wq, OD = geo.OD, OH = geo.OH, OW = geo.OW;
  for (int64_t n0 = 0; n0 < N; n0 += pl.slice) {
    const int64_t n1 = std::min(N, n0 + pl.slice);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t row0 = t * MR;
      T* out = dwt + (g * pl.CKpad + row0) * pl.OW_pad + ob * NR;
      typename S::V acc[MR][NV];
#pragma GCC unroll 12
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = n0 == 0 ? S::zero() : S::load(out + r * pl.OW_pad + v * S::W);
      for (int64_t n = n0; n < n1; ++n) {
        const T* xs = x + (n * geo.C + g * pl.Cg) * geo.channel_stride();
        const T* gy = gp + ((g * pl.OB + ob) * N + n) * pl.P * NR;
        const T* xr[MR];
#pragma GCC unroll 12
        for (int r = 0; r < MR; ++r) xr[r] = xs + off[row0 + r];
        for (int64_t od = 0; od < OD; ++od)
          for (int64_t oh = 0; oh < OH; ++oh) {
            const int64_t rb = (od * Hq + oh) * Wq;
            for (int64_t ow = 0; ow < OW; ++ow, gy += NR) {
              typename S::V gv[NV];
#pragma GCC unroll 4
              for (int v = 0; v < NV; ++v) gv[v] = S::load(gy + v * S::W);
#pragma GCC unroll 12
              for (int r = 0; r < MR; ++r) {
                const typename S::V xv = S::bcast(xr[r] + rb + ow);
#pragma GCC unroll 4
                for (int v = 0; v < NV; ++v) acc[r][v] = S::fma(gv[v], xv, acc[r][v]);
              }
            }
          }
      }
#pragma GCC unroll 12
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) S::store(out + r * pl.OW_pad + v * S::W, acc[r][v]);
    }
  }
}

// gy (N, O, P) -> [G][OB][N][P][NR], zero past each group's last output channel; then the panels;
// then dwt [G][CKpad][OW_pad] -> dw (O, CK). One parallel region, its loops split by barriers.
template <typename T, int MR, int NV>
__attribute__((target("avx512f"))) void conv_wgrad_run(const T* x, const T* gy, T* dw, const ConvGeometry& geo,
                                                        const WGradPlan& pl, const int64_t* off, T* gp, T* dwt,
                                                        bool parallel) {
  constexpr int64_t NR = Simd<T>::W * NV;
  const int64_t G = geo.G, N = geo.N, P = pl.P, panels = pl.panels;
  const int64_t tasks = G * pl.OB * panels;
#pragma omp parallel if (parallel)
  {
#pragma omp for schedule(static)
    for (int64_t gbn = 0; gbn < G * pl.OB * N; ++gbn) {
      const int64_t n = gbn % N, ob = (gbn / N) % pl.OB, g = gbn / N / pl.OB;
      T* dst = gp + gbn * P * NR;
      const int64_t o0 = ob * NR, width = std::min<int64_t>(NR, pl.Og - o0);
      const T* src = gy + (n * geo.O + g * pl.Og + o0) * P;
      for (int64_t p = 0; p < P; ++p) {
        T* d = dst + p * NR;
        for (int64_t j = 0; j < width; ++j) d[j] = src[j * P + p];
        for (int64_t j = width; j < NR; ++j) d[j] = T(0);
      }
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t panel = task % panels, ob = (task / panels) % pl.OB, g = task / panels / pl.OB;
      const int64_t t0 = panel * pl.tiles / panels, t1 = (panel + 1) * pl.tiles / panels;
      wgrad_panel<T, MR, NV>(x, gp, dwt, geo, pl, off, g, ob, t0, t1);
    }
#pragma omp for schedule(static)
    for (int64_t go = 0; go < G * pl.Og; ++go) {
      const int64_t g = go / pl.Og, o = go % pl.Og;
      const T* src = dwt + g * pl.CKpad * pl.OW_pad + o;
      T* d = dw + go * pl.CK;
      for (int64_t ck = 0; ck < pl.CK; ++ck) d[ck] = src[ck * pl.OW_pad];
    }
  }
}
#endif

template <typename T>
void conv_wgrad_typed(const py::array& input, const py::array& grad, py::array& output, const ConvGeometry& geo) {
#ifdef EMBER_X86_SIMD
  // register tiles (MR rows, NV vectors of output channels), picked to waste the fewest lanes
  static const int shapes[4][2] = {{6, 4}, {8, 3}, {8, 2}, {8, 1}};
  constexpr int64_t W = Simd<T>::W;
  WGradPlan pl;
  pl.Cg = geo.C / geo.G, pl.Og = geo.O / geo.G, pl.K = geo.KD * geo.KH * geo.KW, pl.CK = pl.Cg * pl.K;
  pl.P = geo.OD * geo.OH * geo.OW;
  int best = 0;
  double best_cost = 1e300;
  for (int i = 0; i < 4; ++i) {
    const int64_t mr = shapes[i][0], nr = W * shapes[i][1];
    // FMAs on padding rows and channels, plus half a cycle per load or broadcast
    const double cost = double((pl.Og + nr - 1) / nr * nr) * double((pl.CK + mr - 1) / mr * mr) *
                        (1.0 + 0.5 * double(shapes[i][1] + mr) / double(mr * shapes[i][1]));
    if (cost < best_cost) best = i, best_cost = cost;
  }
  const int64_t MR = shapes[best][0], NR = W * shapes[best][1];
  pl.CKpad = (pl.CK + MR - 1) / MR * MR;
  pl.tiles = pl.CKpad / MR;
  pl.OB = (pl.Og + NR - 1) / NR;
  pl.OW_pad = pl.OB * NR;
  // a slice of the batch whose packed gy block (P x NR per sample) stays near 32 KiB
  pl.slice = std::max<int64_t>(1, (32 * 1024 / int64_t(sizeof(T))) / std::max<int64_t>(1, pl.P * NR));
  const int64_t threads =
#ifdef EMBER_HAS_OPENMP
      omp_get_max_threads();
#else
      1;
#endif
  const int64_t work = geo.N * pl.P * pl.OW_pad * pl.CKpad;
  const bool parallel = threads > 1 && work > kParallelWork * 4;
  // a few panels per thread (dynamic scheduling evens out a descheduled thread), one when alone
  const int64_t want = parallel ? (3 * threads + geo.G * pl.OB - 1) / (geo.G * pl.OB) : 1;
  pl.panels = std::max<int64_t>(1, std::min(pl.tiles, want));
  std::vector<int64_t> off(static_cast<size_t>(pl.CKpad));
  for (int64_t i = 0; i < pl.CKpad; ++i) off[i] = geo.offsets[i < pl.CK ? i : 0];
  std::vector<T> gp(static_cast<size_t>(geo.G * pl.OB * geo.N * pl.P * NR));
  std::vector<T> dwt(static_cast<size_t>(geo.G * pl.CKpad * pl.OW_pad));
  const T* x = static_cast<const T*>(input.data());
  const T* gy = static_cast<const T*>(grad.data());
  T* dw = static_cast<T*>(output.mutable_data());
  py::gil_scoped_release release;
  if (best == 0) conv_wgrad_run<T, 6, 4>(x, gy, dw, geo, pl, off.data(), gp.data(), dwt.data(), parallel);
  else if (best == 1) conv_wgrad_run<T, 8, 3>(x, gy, dw, geo, pl, off.data(), gp.data(), dwt.data(), parallel);
  else if (best == 2) conv_wgrad_run<T, 8, 2>(x, gy, dw, geo, pl, off.data(), gp.data(), dwt.data(), parallel);
  else conv_wgrad_run<T, 8, 1>(x, gy, dw, geo, pl, off.data(), gp.data(), dwt.data(), parallel);
#else
  throw std::runtime_error("conv_weight_grad: built without x86 SIMD support");
#endif
}

py::array conv_weight_grad(py::array input, py::array grad, Dims kernel, int64_t groups, Dims stride, Dims dilation) {
  check_dims(kernel, "conv_weight_grad");
  check_dims(stride, "conv_weight_grad");
  check_dims(dilation, "conv_weight_grad");
  check_contiguous(input, "conv_weight_grad");
  check_contiguous(grad, "conv_weight_grad");
  if (input.ndim() != 6 || grad.ndim() != 5)
    throw std::invalid_argument("conv_weight_grad: expected input (N, C, S, Dq, Hq, Wq) and grad (N, O, oD, oH, oW)");
  if (!input.dtype().is(grad.dtype())) throw std::invalid_argument("conv_weight_grad: input and grad differ in dtype");
  if (grad.shape(0) != input.shape(0)) throw std::invalid_argument("conv_weight_grad: input and grad differ in batch");
  if (groups < 1 || input.shape(1) % groups != 0 || grad.shape(1) % groups != 0)
    throw std::invalid_argument("conv_weight_grad: channels do not match groups");
  for (int i = 0; i < 3; ++i)
    if (kernel[i] < 1) throw std::invalid_argument("conv_weight_grad: kernel sizes must be positive");
  // the geometry of the forward convolution: a weight of the gradient's shape, gy's spatial size as output
  const py::ssize_t O = grad.shape(1), Cg = input.shape(1) / groups;
  const std::vector<py::ssize_t> wshape{O, Cg, kernel[0], kernel[1], kernel[2]};
  py::array output(input.dtype(), wshape);
  if (input.shape(0) == 0 || O == 0 || Cg == 0 || grad.shape(2) * grad.shape(3) * grad.shape(4) == 0) {
    std::memset(output.mutable_data(), 0, static_cast<size_t>(output.nbytes()));  // an empty sum
    return output;
  }
  const ConvGeometry geo = conv_geometry(input, output, groups, stride, dilation,
                                         {grad.shape(2), grad.shape(3), grad.shape(4)});
  if (!cpu_has_avx512()) throw std::runtime_error("conv_weight_grad: this CPU lacks AVX-512");
  auto dt = input.dtype();
  if (dt.is(py::dtype::of<float>())) conv_wgrad_typed<float>(input, grad, output, geo);
  else if (dt.is(py::dtype::of<double>())) conv_wgrad_typed<double>(input, grad, output, geo);
  else throw std::invalid_argument("conv_weight_grad: expected float32 or float64 arrays");
  return output;
}

// ---- reflect / replicate / circular padding ------------------------------------------------
// input (P, D, H, W) of any dtype (copied as bytes) -> (P, D + lo + hi, H + ..., W + ...), every
// pad >= 0. Output index o of a dim of size n maps to input index src(o - lo): mirrored without
// repeating the edge (reflect), clamped (replicate) or wrapped (circular). Each output row is
// its source row's centre (one memcpy) plus the mapped border elements.

inline int64_t pad_source(int64_t i, int64_t n, int mode) {
  if (i >= 0 && i < n) return i;
  if (mode == 0) {  // reflect
    i = i < 0 ? -i : i;
    return i >= n ? 2 * (n - 1) - i : i;
  }
  if (mode == 1) return i < 0 ? 0 : n - 1;  // replicate
  return ((i % n) + n) % n;                   // circular
}

struct Bytes16 {
  uint64_t a, b;
};

// E: an unsigned type of the element's size (the values are only moved)
template <typename E>
void pad_rows(const E* x, E* y, const int64_t* dims, const Dims& lo, const Dims& hi, int mode, E fill,
              const std::vector<int64_t>& wsrc) {
  const int64_t P = dims[0], D = dims[1], H = dims[2], W = dims[3];
  const int64_t OD = D + lo[0] + hi[0], OH = H + lo[1] + hi[1], OW = W + lo[2] + hi[2];
  const int64_t rows = P * OD * OH;
  const bool parallel = rows * OW > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t oh = r % OH, od = (r / OH) % OD, pl = r / (OH * OD);
    E* dst = y + r * OW;
    const E* src;
    if (mode == 3) {
      const int64_t sd = od - lo[0], sh = oh - lo[1];
      if (sd < 0 || sd >= D || sh < 0 || sh >= H) {
        for (int64_t o = 0; o < OW; ++o) dst[o] = fill;
        continue;
      }
      src = x + ((pl * D + sd) * H + sh) * W;
      for (int64_t o = 0; o < lo[2]; ++o) dst[o] = fill;
      for (int64_t o = lo[2] + W; o < OW; ++o) dst[o] = fill;
    } else {
      src = x + ((pl * D + pad_source(od - lo[0], D, mode)) * H + pad_source(oh - lo[1], H, mode)) * W;
      for (int64_t o = 0; o < lo[2]; ++o) dst[o] = src[wsrc[o]];
      for (int64_t o = lo[2] + W; o < OW; ++o) dst[o] = src[wsrc[o]];
    }
    std::memcpy(dst + lo[2], src, static_cast<size_t>(W) * sizeof(E));
  }
}

template <typename E>
void pad_dispatch(const py::array& input, py::array& output, const int64_t* dims, const Dims& lo, const Dims& hi,
                  int mode, const char* value, const std::vector<int64_t>& wsrc) {
  E fill;
  std::memcpy(&fill, value, sizeof(E));
  pad_rows<E>(static_cast<const E*>(input.data()), static_cast<E*>(output.mutable_data()), dims, lo, hi, mode, fill,
              wsrc);
}

py::array pad_nd(py::array input, Dims lo, Dims hi, int mode, py::object fill) {
  check_contiguous(input, "pad_nd");
  check_dims(lo, "pad_nd");
  check_dims(hi, "pad_nd");
  if (input.ndim() != 4) throw std::invalid_argument("pad_nd: input must be (planes, D, H, W)");
  if (mode < 0 || mode > 3)
    throw std::invalid_argument("pad_nd: mode must be 0 (reflect), 1 (replicate), 2 (circular) or 3 (constant)");
  std::vector<char> value(16, 0);
  if (mode == 3) {
    py::array f = py::array::ensure(fill);
    if (!f || f.size() != 1 || !f.dtype().is(input.dtype()))
      throw std::invalid_argument("pad_nd: constant mode needs a one-element fill array of the input's dtype");
    std::memcpy(value.data(), f.data(), static_cast<size_t>(input.itemsize()));
  }
  const int64_t dims[4] = {input.shape(0), input.shape(1), input.shape(2), input.shape(3)};
  for (int i = 0; i < 3; ++i) {
    const int64_t n = dims[1 + i];
    if (lo[i] < 0 || hi[i] < 0) throw std::invalid_argument("pad_nd: pads must be non-negative");
    if (mode == 3) continue;
    if ((lo[i] || hi[i]) && n == 0) throw std::invalid_argument("pad_nd: cannot pad an empty dim");
    if (mode == 0 && (lo[i] || hi[i]) && (lo[i] >= n || hi[i] >= n))
      throw std::invalid_argument("pad_nd: reflect pads must be smaller than the dim");
    if (mode == 2 && (lo[i] > n || hi[i] > n)) throw std::invalid_argument("pad_nd: circular pads must not exceed the dim");
  }
  const int64_t OW = dims[3] + lo[2] + hi[2];
  py::array output(input.dtype(), std::vector<py::ssize_t>{dims[0], dims[1] + lo[0] + hi[0], dims[2] + lo[1] + hi[1], OW});
  std::vector<int64_t> wsrc(static_cast<size_t>(OW));
  for (int64_t o = 0; o < OW; ++o) wsrc[o] = mode == 3 ? 0 : pad_source(o - lo[2], dims[3], mode);
  const int64_t item = input.itemsize();
  py::gil_scoped_release release;
  if (item == 1) pad_dispatch<uint8_t>(input, output, dims, lo, hi, mode, value.data(), wsrc);
  else if (item == 2) pad_dispatch<uint16_t>(input, output, dims, lo, hi, mode, value.data(), wsrc);
  else if (item == 4) pad_dispatch<uint32_t>(input, output, dims, lo, hi, mode, value.data(), wsrc);
  else if (item == 8) pad_dispatch<uint64_t>(input, output, dims, lo, hi, mode, value.data(), wsrc);
  else if (item == 16) pad_dispatch<Bytes16>(input, output, dims, lo, hi, mode, value.data(), wsrc);
  else throw std::invalid_argument("pad_nd: unsupported element size");
  return output;
}

// ---- zero padding for the convolution kernels ----------------------------------------------
// input (P, D, H, W) of 4- or 8-byte elements -> (P, D + lo + hi, ...) with zeros around: the
// padded input of conv_avx512 and conv_weight_grad at stride 1. pad_nd's constant mode does the
// same for any layout, but its per-row index arithmetic dominates on small images (an 8x8 image
// has 10 rows of 10); here a row shorter than a vector is one masked load and one masked store.

// Blocks of planes are zeroed with one memset each, then the input rows are copied in: per-plane and
// per-row zero fills (two memset calls a plane, short loops a row) took 3x the time of a plain copy on
// 8x8 images. Rows of up to 16 elements copy a size known when compiling (kW: a few vector moves instead
// of a memcpy call per row).
template <typename E, int64_t kW = 0>
void pad_zero_rows(const E* x, E* y, int64_t P, int64_t D, int64_t H, int64_t row_length, const Dims& lo,
                   const Dims& hi) {
  constexpr int64_t kPlaneBlock = 64;
  const int64_t W = kW > 0 ? kW : row_length;
  const int64_t OD = D + lo[0] + hi[0], OH = H + lo[1] + hi[1], OW = W + lo[2] + hi[2];
  const int64_t out_plane = OD * OH * OW;
  const bool parallel = P * out_plane > 4 * kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t p0 = 0; p0 < P; p0 += kPlaneBlock) {
    const int64_t p1 = std::min(P, p0 + kPlaneBlock);
    std::memset(y + p0 * out_plane, 0, static_cast<size_t>((p1 - p0) * out_plane) * sizeof(E));
    for (int64_t p = p0; p < p1; ++p) {
      const E* xp = x + p * D * H * W;
      for (int64_t d = 0; d < D; ++d) {
        E* yd = y + p * out_plane + ((d + lo[0]) * OH + lo[1]) * OW + lo[2];
        const E* xd = xp + d * H * W;
        for (int64_t h = 0; h < H; ++h) std::memcpy(yd + h * OW, xd + h * W, static_cast<size_t>(W) * sizeof(E));
      }
    }
  }
}

template <typename E, int64_t kW = 1>
void pad_zero_fixed(const E* x, E* y, int64_t P, int64_t D, int64_t H, int64_t W, const Dims& lo, const Dims& hi) {
  if constexpr (kW <= 16) {
    if (W == kW) return pad_zero_rows<E, kW>(x, y, P, D, H, W, lo, hi);
    return pad_zero_fixed<E, kW + 1>(x, y, P, D, H, W, lo, hi);
  } else {
    pad_zero_rows<E>(x, y, P, D, H, W, lo, hi);
  }
}

#ifdef EMBER_X86_SIMD
// Rows of at most 64 bytes: each output row is the input row shifted by lo[2] lanes.
template <typename E>
__attribute__((target("avx512f,avx512bw"))) void pad_zero_short_rows(const E* x, E* y, int64_t P, int64_t D, int64_t H,
                                                                     int64_t W, const Dims& lo, const Dims& hi) {
  const int64_t OD = D + lo[0] + hi[0], OH = H + lo[1] + hi[1], OW = W + lo[2] + hi[2];
  const int64_t out_plane = OD * OH * OW, es = sizeof(E);
  const __mmask64 out_mask = OW * es >= 64 ? ~__mmask64(0) : (__mmask64(1) << (OW * es)) - 1;
  const __mmask64 in_mask = W == 0 ? __mmask64(0) : ((__mmask64(1) << (W * es)) - 1) << (lo[2] * es);  // W * es < 64
  const bool parallel = P * out_plane > 4 * kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t p = 0; p < P; ++p) {
    char* yp = reinterpret_cast<char*>(y + p * out_plane);
    const char* xp = reinterpret_cast<const char*>(x + p * D * H * W);
    for (int64_t od = 0; od < OD; ++od) {
      const int64_t d = od - lo[0];
      char* yd = yp + od * OH * OW * es;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h = oh - lo[1];
        __m512i v = _mm512_setzero_si512();
        // the masked-off bytes before the row are never read, so starting lo[2] elements early is safe
        if (d >= 0 && d < D && h >= 0 && h < H)
          v = _mm512_maskz_loadu_epi8(in_mask, xp + ((d * H + h) * W - lo[2]) * es);
        _mm512_mask_storeu_epi8(yd + oh * OW * es, out_mask, v);
      }
    }
  }
}
#endif

py::array pad_zero(py::array input, Dims lo, Dims hi) {
  check_contiguous(input, "pad_zero");
  check_dims(lo, "pad_zero");
  check_dims(hi, "pad_zero");
  if (input.ndim() != 4) throw std::invalid_argument("pad_zero: input must be (planes, D, H, W)");
  for (int i = 0; i < 3; ++i)
    if (lo[i] < 0 || hi[i] < 0) throw std::invalid_argument("pad_zero: pads must be non-negative");
  const int64_t P = input.shape(0), D = input.shape(1), H = input.shape(2), W = input.shape(3);
  const int64_t OW = W + lo[2] + hi[2], item = input.itemsize();
  py::array output(input.dtype(), std::vector<py::ssize_t>{P, D + lo[0] + hi[0], H + lo[1] + hi[1], OW});
  if (item != 4 && item != 8) throw std::invalid_argument("pad_zero: expected 4- or 8-byte elements");
  py::gil_scoped_release release;
#ifdef EMBER_X86_SIMD
  static const bool short_rows_ok = (__builtin_cpu_init(), __builtin_cpu_supports("avx512bw"));
  if (short_rows_ok && OW * item <= 64 && W * item < 64) {
    if (item == 4) pad_zero_short_rows<uint32_t>(static_cast<const uint32_t*>(input.data()),
                                                 static_cast<uint32_t*>(output.mutable_data()), P, D, H, W, lo, hi);
    else pad_zero_short_rows<uint64_t>(static_cast<const uint64_t*>(input.data()),
                                       static_cast<uint64_t*>(output.mutable_data()), P, D, H, W, lo, hi);
    return output;
  }
#endif
  if (item == 4) pad_zero_fixed<uint32_t>(static_cast<const uint32_t*>(input.data()),
                                          static_cast<uint32_t*>(output.mutable_data()), P, D, H, W, lo, hi);
  else pad_zero_fixed<uint64_t>(static_cast<const uint64_t*>(input.data()),
                                static_cast<uint64_t*>(output.mutable_data()), P, D, H, W, lo, hi);
  return output;
}

// ---- separable resampling along one axis (interpolate) -------------------------------------
// x (outer, n_in, inner) -> (outer, n_out, inner): out[a, o, b] = sum_t w[o, t] * x[a, idx[o, t], b].

template <typename T>
void resample_axis_typed(const py::array& input, const int64_t* idx, const T* w, int64_t T_, py::array& output) {
  const int64_t A = input.shape(0), n_in = input.shape(1), B = input.shape(2), n_out = output.shape(1);
  const T* x = static_cast<const T*>(input.data());
  T* y = static_cast<T*>(output.mutable_data());
  const bool parallel = A * n_out * B * T_ > kParallelWork;
#pragma omp parallel for schedule(guided) if (parallel)
  for (int64_t ao = 0; ao < A * n_out; ++ao) {
    const int64_t a = ao / n_out, o = ao % n_out;
    T* out = y + ao * B;
    const T* src = x + a * n_in * B;
    const int64_t* id = idx + o * T_;
    const T* wt = w + o * T_;
    if (B == 1) {
      T acc = T(0);
      for (int64_t t = 0; t < T_; ++t) acc += src[id[t]] * wt[t];
      out[0] = acc;
      continue;
    }
    {
      const T* row = src + id[0] * B;
      const T w0 = wt[0];
      for (int64_t b = 0; b < B; ++b) out[b] = row[b] * w0;
    }
    for (int64_t t = 1; t < T_; ++t) {
      const T* row = src + id[t] * B;
      const T wv = wt[t];
      for (int64_t b = 0; b < B; ++b) out[b] += row[b] * wv;
    }
  }
}

py::array resample_axis(py::array input, py::array_t<int64_t, py::array::c_style> indices, py::array weights) {
  check_contiguous(input, "resample_axis");
  check_contiguous(weights, "resample_axis");
  if (input.ndim() != 3 || indices.ndim() != 2 || weights.ndim() != 2 || indices.shape(0) != weights.shape(0) ||
      indices.shape(1) != weights.shape(1))
    throw std::invalid_argument("resample_axis: expected x (outer, n_in, inner), indices and weights (n_out, taps)");
  if (!weights.dtype().is(input.dtype())) throw std::invalid_argument("resample_axis: weights and input differ in dtype");
  const int64_t n_in = input.shape(1), n_out = indices.shape(0), taps = indices.shape(1);
  const int64_t* idx = indices.data();
  for (int64_t i = 0; i < n_out * taps; ++i)
    if (idx[i] < 0 || idx[i] >= n_in) throw std::out_of_range("resample_axis: index out of range");
  py::array output(input.dtype(), std::vector<py::ssize_t>{input.shape(0), n_out, input.shape(2)});
  auto dt = input.dtype();
  py::gil_scoped_release release;
  if (dt.is(py::dtype::of<float>()))
    resample_axis_typed<float>(input, idx, static_cast<const float*>(weights.data()), taps, output);
  else if (dt.is(py::dtype::of<double>()))
    resample_axis_typed<double>(input, idx, static_cast<const double*>(weights.data()), taps, output);
  else
    throw std::invalid_argument("resample_axis: unsupported dtype");
  return output;
}

}  // namespace

void init_conv(py::module_& m) {
  m.def("max_pool", &max_pool, py::arg("input"), py::arg("out_size"), py::arg("kernel"), py::arg("stride"),
        py::arg("padding"), py::arg("dilation"), py::arg("with_indices"),
        "Max pooling of (planes, D, H, W); returns values, or (values, flat int64 indices per plane).");
  m.def("avg_pool", &avg_pool, py::arg("input"), py::arg("out_size"), py::arg("kernel"), py::arg("stride"),
        py::arg("padding"), py::arg("count_include_pad"), py::arg("divisor_override"),
        "Average pooling of (planes, D, H, W); divisor_override <= 0 means none.");
  m.def("adaptive_max_pool", &adaptive_max_pool, py::arg("input"), py::arg("out_size"),
        "Adaptive max pooling of (planes, D, H, W); returns (values, flat int64 indices per plane).");
  m.def("adaptive_avg_pool", &adaptive_avg_pool, py::arg("input"), py::arg("out_size"),
        "Adaptive average pooling of (planes, D, H, W).");
  m.def("col2im", &col2im, py::arg("cols"), py::arg("planes"), py::arg("image_size"), py::arg("kernel"),
        py::arg("col_size"), py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("parallel") = true,
        "Scatter-add columns (planes, kD, kH, kW, lD, lH, lW) into images (planes, D, H, W); parallel=False "
        "keeps to the calling thread (right after a BLAS call, whose threads are still spinning).");
  m.def("grid_sample", &grid_sample, py::arg("input"), py::arg("grid"), py::arg("mode"), py::arg("padding_mode"),
        py::arg("align_corners"),
        "Bilinear (mode 0) or nearest (mode 1) sampling of (N, C, D, H, W) at grid (N, P, 2 or 3); "
        "padding_mode 0 zeros, 1 border, 2 reflection.");
  m.def("conv_avx2_available", &cpu_has_avx2, "Whether conv_avx2 can run here (the CPU has AVX2 and FMA).");
  m.def("conv_avx2", &conv_avx2, py::arg("input"), py::arg("weight"), py::arg("bias"), py::arg("groups"),
        py::arg("stride"), py::arg("dilation"), py::arg("out_size"), py::arg("variant") = 0,
        "float32 convolution (AVX2 + FMA): input (N, C, S, Dq, Hq, Wq) split by stride phases as for conv_avx512, "
        "weight (O, C/G, kD, kH, kW), bias (O,) or None -> (N, O, oD, oH, oW). variant 1-3 forces a tile.");
  m.def("conv_fast_available", &cpu_has_avx512, "Whether conv_avx512 can run here (the CPU has AVX-512).");
  m.def("conv_avx512", &conv_avx512, py::arg("input"), py::arg("weight"), py::arg("bias"), py::arg("groups"),
        py::arg("stride"), py::arg("dilation"), py::arg("out_size"), py::arg("variant") = 0,
        "float32 convolution (AVX-512 implicit GEMM) of a zero-padded input split into its stride phases, "
        "(N, C, SD * SH * SW, Dq, Hq, Wq), by (O, C / groups, kD, kH, kW); bias (O,) or None. variant 0 picks "
        "the kernel and tile by cost; 1-4 force a flat-grid tile, 5-8 a tile along output channels.");
  m.def("pad_nd", &pad_nd, py::arg("input"), py::arg("lo"), py::arg("hi"), py::arg("mode"),
        py::arg("fill") = py::none(),
        "Reflect (0), replicate (1), circular (2) or constant (3, value in the one-element array fill) padding "
        "of (planes, D, H, W), any dtype, pads >= 0.");
  m.def("pad_zero", &pad_zero, py::arg("input"), py::arg("lo"), py::arg("hi"),
        "Zero padding of (planes, D, H, W) of 4- or 8-byte elements, pads >= 0 (the convolutions' padded input).");
  m.def("resample_axis", &resample_axis, py::arg("input"), py::arg("indices"), py::arg("weights"),
        "x (outer, n_in, inner) -> (outer, n_out, inner): the weighted sum over taps of x at indices[o, t].");
  m.def("conv_weight_grad", &conv_weight_grad, py::arg("input"), py::arg("grad"), py::arg("kernel"),
        py::arg("groups"), py::arg("stride"), py::arg("dilation"),
        "float32/float64 convolution weight gradient (AVX-512): input split by stride phases as for conv_avx512, "
        "(N, C, SD * SH * SW, Dq, Hq, Wq), grad (N, O, oD, oH, oW) -> (O, C / groups, kD, kH, kW).");
  m.def("conv_direct", &conv_direct, py::arg("input"), py::arg("weight"), py::arg("out_size"), py::arg("stride"),
        py::arg("padding"), py::arg("dilation"), py::arg("groups"),
        "Direct grouped convolution of (N, C, D, H, W) by (O, C / groups, kD, kH, kW), for thin groups.");
}
