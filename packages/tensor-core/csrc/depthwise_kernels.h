// The kernels of csrc/depthwise.cpp, included there twice (x86-64 baseline and AVX2 + FMA, picked at run
// time); no includes: the .cpp includes what they need first.

constexpr int64_t kParallelWork = int64_t(1) << 15;

// sum_i g[i] * x[i * sx] as eight float64 partial sums added in a fixed order (the same bits on every
// instruction set).
template <typename T>
__attribute__((noinline)) double strided_dot(const T* __restrict__ g, const T* __restrict__ x, int64_t n,
                                             int64_t sx) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  if (sx == 1) {
    for (; i + 8 <= n; i += 8)
      for (int k = 0; k < 8; ++k) acc[k] += double(g[i + k]) * double(x[i + k]);
  } else {
    for (; i + 8 <= n; i += 8)
      for (int k = 0; k < 8; ++k) acc[k] += double(g[i + k]) * double(x[(i + k) * sx]);
  }
  double tail = 0.0;
  for (; i < n; ++i) tail += double(g[i]) * double(x[i * sx]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

// The output columns [ow0, ow1) whose input column ow * s + off lies in [0, W).
inline void column_range(int64_t off, int64_t s, int64_t W, int64_t oW, int64_t& ow0, int64_t& ow1) {
  ow0 = off >= 0 ? 0 : (-off + s - 1) / s;
  ow1 = W - off <= 0 ? 0 : (W - off + s - 1) / s;
  if (ow1 > oW) ow1 = oW;
}

// dW[c, kh, kw] = sum over n, oh, ow of gy[n, c, oh, ow] * x[n, c, oh sh - ph + kh dh, ow sw - pw + kw dw]:
// x (N, C, H, W), gy (N, C, oH, oW), dw (C, kH, kW); channels split over threads, float64 sums per tap
// (samples and rows in order).
template <typename T>
void depthwise_weight_grad(const T* x, const T* gy, T* dw, int64_t N, int64_t C, int64_t H, int64_t W,
                           int64_t oH, int64_t oW, int64_t kH, int64_t kW, int64_t sh, int64_t sw, int64_t ph,
                           int64_t pw, int64_t dh, int64_t dwl) {
  const bool parallel = N * C * oH * oW * kH * kW > kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t kh = 0; kh < kH; ++kh)
      for (int64_t kw = 0; kw < kW; ++kw) {
        const int64_t offw = kw * dwl - pw;
        int64_t ow0, ow1;
        column_range(offw, sw, W, oW, ow0, ow1);
        double acc = 0.0;
        if (ow0 < ow1) {
          for (int64_t n = 0; n < N; ++n) {
            const T* xp = x + (n * C + c) * H * W;
            const T* gp = gy + (n * C + c) * oH * oW;
            for (int64_t oh = 0; oh < oH; ++oh) {
              const int64_t h = oh * sh - ph + kh * dh;
              if (h < 0 || h >= H) continue;
              acc += strided_dot<T>(gp + oh * oW + ow0, xp + h * W + ow0 * sw + offw, ow1 - ow0, sw);
            }
          }
        }
        dw[(c * kH + kh) * kW + kw] = T(acc);
      }
  }
}

// One output-gradient row scattered into one input row: xrow[ow * s] += w * grow[ow] for ow < n.
template <typename T>
__attribute__((noinline)) void scatter_row(T* __restrict__ xrow, const T* __restrict__ grow, T w, int64_t n,
                                           int64_t s) {
  if (s == 1) {
    for (int64_t i = 0; i < n; ++i) xrow[i] += w * grow[i];
  } else {
    for (int64_t i = 0; i < n; ++i) xrow[i * s] += w * grow[i];
  }
}

// dx[n, c, h, w] = sum over taps of w[c, kh, kw] * gy[n, c, oh, ow] where h = oh sh - ph + kh dh and
// w = ow sw - pw + kw dw: dx (N, C, H, W) zeroed here; planes split over threads, taps added in order.
template <typename T>
void depthwise_input_grad(const T* gy, const T* wt, T* dx, int64_t N, int64_t C, int64_t H, int64_t W,
                          int64_t oH, int64_t oW, int64_t kH, int64_t kW, int64_t sh, int64_t sw, int64_t ph,
                          int64_t pw, int64_t dh, int64_t dwl) {
  const bool parallel = N * C * oH * oW * kH * kW > kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t plane = 0; plane < N * C; ++plane) {
    const int64_t c = plane % C;
    T* xp = dx + plane * H * W;
    const T* gp = gy + plane * oH * oW;
    for (int64_t i = 0; i < H * W; ++i) xp[i] = T(0);
    for (int64_t kh = 0; kh < kH; ++kh)
      for (int64_t kw = 0; kw < kW; ++kw) {
        const T w = wt[(c * kH + kh) * kW + kw];
        const int64_t offw = kw * dwl - pw;
        int64_t ow0, ow1;
        column_range(offw, sw, W, oW, ow0, ow1);
        if (ow0 >= ow1) continue;
        for (int64_t oh = 0; oh < oH; ++oh) {
          const int64_t h = oh * sh - ph + kh * dh;
          if (h < 0 || h >= H) continue;
          scatter_row<T>(xp + h * W + ow0 * sw + offw, gp + oh * oW + ow0, w, ow1 - ow0, sw);
        }
      }
  }
}
