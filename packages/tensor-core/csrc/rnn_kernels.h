// The kernels of csrc/rnn.cpp, included there twice: once for the x86-64 baseline and once under
// `#pragma GCC target("avx2,fma")` (picked at run time). No includes here: rnn.cpp includes what it
// needs first. The file is built with -ffp-contract=off, so both copies give the same bits.

// Above this many elements per step the batch rows are split over ember's OpenMP threads.
constexpr int64_t kParallelElements = int64_t(1) << 15;

#include "wide_math.h"

// 1 / (1 + e**-x) in float64, rounded once (NaN passes through).
inline float sigmoid_of(float xf) {
  double x = -double(xf);
  x = x < -100.0 ? -100.0 : (x > 100.0 ? 100.0 : x);
  const float result = float(1.0 / (1.0 + exp_clamped(x)));
  return xf != xf ? xf : result;
}

inline double sigmoid_of(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// tanh(x) = sign(x) (1 - 2 / (e**2|x| + 1)) in float64, rounded once; below 2**-20 it rounds to x.
inline float tanh_of(float xf) {
  const double x = xf;
  const double a = x < 0 ? -x : x;
  const double big = 1.0 - 2.0 / (exp_clamped(a < 20.0 ? 2.0 * a : 40.0) + 1.0);
  const double result = a < 0x1p-20 ? x : (x < 0 ? -big : big);
  return xf != xf ? xf : float(result);
}

inline double tanh_of(double x) { return std::tanh(x); }

// a (B, 4H): the step's h W_hh^T, in place -> activations i, f, g, o; pre (B, 4H): x W_ih^T + biases;
// c_prev, c_out, tanh_c, h_out (B, H).
template <typename T>
void lstm_forward(T* __restrict__ A, const T* __restrict__ P, const T* __restrict__ CP, T* __restrict__ C,
                  T* __restrict__ TC, T* __restrict__ HO, int64_t B, int64_t H) {
#pragma omp parallel for if (B * H * 4 > kParallelElements)
  for (int64_t b = 0; b < B; ++b) {
    T* ar = A + b * 4 * H;
    const T* pr = P + b * 4 * H;
    T *i = ar, *f = ar + H, *g = ar + 2 * H, *o = ar + 3 * H;
    for (int64_t j = 0; j < 4 * H; ++j) ar[j] += pr[j];
    for (int64_t j = 0; j < 2 * H; ++j) ar[j] = sigmoid_of(ar[j]);  // i and f
    for (int64_t j = 0; j < H; ++j) g[j] = tanh_of(g[j]);
    for (int64_t j = 0; j < H; ++j) o[j] = sigmoid_of(o[j]);
    const T* cp = CP + b * H;
    T* c = C + b * H;
    T* tc = TC + b * H;
    T* h = HO + b * H;
    for (int64_t j = 0; j < H; ++j) c[j] = f[j] * cp[j] + i[j] * g[j];
    for (int64_t j = 0; j < H; ++j) tc[j] = tanh_of(c[j]);
    for (int64_t j = 0; j < H; ++j) h[j] = o[j] * tc[j];
  }
}

// One batch row of lstm_backward. A function of its own (not inlined): inside the OpenMP region GCC lost
// the pointers' restrict qualifiers and left the loop scalar.
template <typename T>
__attribute__((noinline)) void lstm_backward_row(const T* __restrict__ i, const T* __restrict__ f,
                                                 const T* __restrict__ g, const T* __restrict__ o,
                                                 const T* __restrict__ d, const T* __restrict__ tc,
                                                 const T* __restrict__ cp, T* __restrict__ dcr, T* __restrict__ di,
                                                 T* __restrict__ df, T* __restrict__ dgg, T* __restrict__ dout,
                                                 int64_t H) {
  const T one = T(1);
  for (int64_t j = 0; j < H; ++j) {
    const T dct = dcr[j] + d[j] * o[j] * (one - tc[j] * tc[j]);
    di[j] = dct * g[j] * (i[j] * (one - i[j]));
    df[j] = dct * cp[j] * (f[j] * (one - f[j]));
    dgg[j] = dct * i[j] * (one - g[j] * g[j]);
    dout[j] = d[j] * tc[j] * (o[j] * (one - o[j]));
    dcr[j] = dct * f[j];
  }
}

// dh (B, H): the gradient reaching h_t (later steps' and the output's, summed by the caller);
// acts (B, 4H): the forward's activations; tanh_c, c_prev (B, H); dc (B, H): in: the gradient reaching
// c_t from later steps, out: the one reaching c_{t-1}; d_gates (B, 4H): the pre-activations' gradients.
template <typename T>
void lstm_backward(const T* DH, const T* AC, const T* TC, const T* CP, T* DC, T* DG, int64_t B, int64_t H) {
#pragma omp parallel for if (B * H * 4 > kParallelElements)
  for (int64_t b = 0; b < B; ++b) {
    const T* a = AC + b * 4 * H;
    T* dg = DG + b * 4 * H;
    lstm_backward_row<T>(a, a + H, a + 2 * H, a + 3 * H, DH + b * H, TC + b * H, CP + b * H, DC + b * H, dg, dg + H,
                         dg + 2 * H, dg + 3 * H, H);
  }
}

// gh (B, 3H): the step's h W_hh^T, in place -> plus b_hh (BI, or null; kept for backward); gi (B, 3H):
// x W_ih^T + b_ih; h_prev (B, H); rz (B, 2H), n (B, H), h_out (B, H) written.
template <typename T>
void gru_forward(T* __restrict__ GH, const T* __restrict__ BI, const T* __restrict__ GI, const T* __restrict__ HP,
                 T* __restrict__ RZ, T* __restrict__ N, T* __restrict__ HO, int64_t B, int64_t H) {
#pragma omp parallel for if (B * H * 3 > kParallelElements)
  for (int64_t b = 0; b < B; ++b) {
    T* ghr = GH + b * 3 * H;
    const T* gir = GI + b * 3 * H;
    if (BI != nullptr)
      for (int64_t j = 0; j < 3 * H; ++j) ghr[j] += BI[j];
    T* rzr = RZ + b * 2 * H;
    for (int64_t j = 0; j < 2 * H; ++j) rzr[j] = sigmoid_of(gir[j] + ghr[j]);
    const T* hp = HP + b * H;
    T* n = N + b * H;
    T* h = HO + b * H;
    for (int64_t j = 0; j < H; ++j) n[j] = tanh_of(gir[2 * H + j] + rzr[j] * ghr[2 * H + j]);
    for (int64_t j = 0; j < H; ++j) h[j] = n[j] + rzr[H + j] * (hp[j] - n[j]);
  }
}

// One batch row of gru_backward (a function of its own for the reason of lstm_backward_row).
template <typename T>
__attribute__((noinline)) void gru_backward_row(const T* __restrict__ r, const T* __restrict__ z,
                                                const T* __restrict__ n, const T* __restrict__ ghn,
                                                const T* __restrict__ hp, const T* __restrict__ d,
                                                T* __restrict__ gi_r, T* __restrict__ gi_z, T* __restrict__ gi_n,
                                                T* __restrict__ gh_r, T* __restrict__ gh_z, T* __restrict__ gh_n,
                                                T* __restrict__ dd, int64_t H) {
  const T one = T(1);
  for (int64_t j = 0; j < H; ++j) {
    const T dpn = d[j] * (one - z[j]) * (one - n[j] * n[j]);
    const T dpz = d[j] * (hp[j] - n[j]) * (z[j] * (one - z[j]));
    const T dpr = dpn * ghn[j] * (r[j] * (one - r[j]));
    gi_r[j] = dpr;
    gi_z[j] = dpz;
    gi_n[j] = dpn;
    gh_r[j] = dpr;
    gh_z[j] = dpz;
    gh_n[j] = dpn * r[j];
    dd[j] = d[j] * z[j];
  }
}

// dh (B, H): the gradient reaching h_t; rz, n, gh (with b_hh), h_prev: the forward's; d_gi (B, 3H) and
// d_gh (B, 3H): the gradients of x W_ih^T + b_ih and of h W_hh^T + b_hh; dh_direct (B, H): dh * z, the
// part of h_{t-1}'s gradient that does not go through W_hh.
template <typename T>
void gru_backward(const T* DH, const T* RZ, const T* N, const T* GH, const T* HP, T* DGI, T* DGH, T* DD, int64_t B,
                  int64_t H) {
#pragma omp parallel for if (B * H * 3 > kParallelElements)
  for (int64_t b = 0; b < B; ++b) {
    const T* r = RZ + b * 2 * H;
    T* gi = DGI + b * 3 * H;
    T* gh = DGH + b * 3 * H;
    gru_backward_row<T>(r, r + H, N + b * H, GH + b * 3 * H + 2 * H, HP + b * H, DH + b * H, gi, gi + H, gi + 2 * H,
                        gh, gh + H, gh + 2 * H, DD + b * H, H);
  }
}
