// Gate arithmetic of one time step of nn.LSTM and nn.GRU, forward and backward
// (ember/nn/modules/_rnn_fused.py runs the time loop and the h W_hh^T products through numpy's BLAS), and
// an LSTM or GRU layer-direction's whole time loop (lstm_/gru_forward_sequence, lstm_/gru_backward_sequence; at
// the end).
//
// Per step numpy needed about fifteen calls on arrays of a few thousand elements (each 1-4 us on the
// shared 2-core machine) around one ~25 us matrix product; these kernels do a step's elementwise work in
// one pass over the batch rows. Arrays are C-contiguous, of one float dtype, shaped (B, k * H) as noted
// at each kernel (csrc/rnn_kernels.h); the gates are in PyTorch's order (LSTM i, f, g, o; GRU r, z, n).
//
// Values: float32 sigmoid and tanh are computed in float64 (exp by range reduction and a degree-11
// polynomial, error near 1e-15) and rounded once, within an ulp of the correctly rounded result as
// ember's own sigmoid and tanh kernels are; products and sums are the reference recurrence's (rnn.py's
// step functions) in the input's type. float64 calls the C library's exp and tanh. Rows are independent,
// so results do not depend on the thread count. The kernels are compiled for the x86-64 baseline and for
// AVX2 + FMA (without contraction: same bits), the latter picked at run time where the CPU has them.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace rnn_base {
#include "rnn_kernels.h"
}  // namespace rnn_base

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define EMBER_RNN_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace rnn_avx2 {
#include "rnn_kernels.h"
}  // namespace rnn_avx2
#pragma GCC pop_options
#endif

namespace {

bool use_avx2() {
#ifdef EMBER_RNN_AVX2
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

#ifdef EMBER_RNN_AVX2
#define EMBER_RNN_CALL(FN, T, ...) \
  (use_avx2() ? rnn_avx2::FN<T>(__VA_ARGS__) : rnn_base::FN<T>(__VA_ARGS__))
#else
#define EMBER_RNN_CALL(FN, T, ...) rnn_base::FN<T>(__VA_ARGS__)
#endif

// Every array must be C-contiguous with the dtype of the first and hold its expected element count.
void check(const char* op, const py::array& first, std::initializer_list<std::pair<const py::array*, int64_t>> arrays) {
  for (const auto& [a, count] : arrays) {
    if (!a->dtype().is(first.dtype()) || !(a->flags() & py::array::c_style) || a->size() != count)
      throw std::invalid_argument(std::string(op) + ": every array must be C-contiguous, of one dtype, of the "
                                  "step's size");
  }
}

bool is_double(const py::array& a) {
  if (a.dtype().is(py::dtype::of<double>())) return true;
  if (a.dtype().is(py::dtype::of<float>())) return false;
  throw std::invalid_argument("the rnn step kernels take float32 or float64 arrays");
}

template <typename T>
T* w(py::array& a) {
  return static_cast<T*>(a.mutable_data());
}

template <typename T>
const T* r(const py::array& a) {
  return static_cast<const T*>(a.data());
}

void lstm_forward_step(py::array a, py::array pre, py::array c_prev, py::array c_out, py::array tanh_c,
                       py::array h_out) {
  const int64_t B = a.ndim() == 2 ? a.shape(0) : 0, H = a.ndim() == 2 ? a.shape(1) / 4 : 0;
  check("lstm_forward_step", a,
        {{&a, 4 * B * H}, {&pre, 4 * B * H}, {&c_prev, B * H}, {&c_out, B * H}, {&tanh_c, B * H}, {&h_out, B * H}});
  const bool dbl = is_double(a);
  py::gil_scoped_release release;
  if (dbl)
    EMBER_RNN_CALL(lstm_forward, double, w<double>(a), r<double>(pre), r<double>(c_prev), w<double>(c_out),
                   w<double>(tanh_c), w<double>(h_out), B, H);
  else
    EMBER_RNN_CALL(lstm_forward, float, w<float>(a), r<float>(pre), r<float>(c_prev), w<float>(c_out),
                   w<float>(tanh_c), w<float>(h_out), B, H);
}

void lstm_backward_step(py::array dh, py::array acts, py::array tanh_c, py::array c_prev, py::array dc,
                        py::array d_gates) {
  const int64_t B = acts.ndim() == 2 ? acts.shape(0) : 0, H = acts.ndim() == 2 ? acts.shape(1) / 4 : 0;
  check("lstm_backward_step", acts,
        {{&dh, B * H}, {&acts, 4 * B * H}, {&tanh_c, B * H}, {&c_prev, B * H}, {&dc, B * H}, {&d_gates, 4 * B * H}});
  const bool dbl = is_double(acts);
  py::gil_scoped_release release;
  if (dbl)
    EMBER_RNN_CALL(lstm_backward, double, r<double>(dh), r<double>(acts), r<double>(tanh_c), r<double>(c_prev),
                   w<double>(dc), w<double>(d_gates), B, H);
  else
    EMBER_RNN_CALL(lstm_backward, float, r<float>(dh), r<float>(acts), r<float>(tanh_c), r<float>(c_prev),
                   w<float>(dc), w<float>(d_gates), B, H);
}

void gru_forward_step(py::array gh, py::object bias, py::array gi, py::array h_prev, py::array rz, py::array n,
                      py::array h_out) {
  const int64_t B = gh.ndim() == 2 ? gh.shape(0) : 0, H = gh.ndim() == 2 ? gh.shape(1) / 3 : 0;
  check("gru_forward_step", gh,
        {{&gh, 3 * B * H}, {&gi, 3 * B * H}, {&h_prev, B * H}, {&rz, 2 * B * H}, {&n, B * H}, {&h_out, B * H}});
  py::array b;
  if (!bias.is_none()) {
    b = py::reinterpret_borrow<py::array>(bias);
    check("gru_forward_step", gh, {{&b, 3 * H}});
  }
  const bool dbl = is_double(gh);
  const bool has_bias = !bias.is_none();
  py::gil_scoped_release release;
  if (dbl)
    EMBER_RNN_CALL(gru_forward, double, w<double>(gh), has_bias ? r<double>(b) : nullptr, r<double>(gi),
                   r<double>(h_prev), w<double>(rz), w<double>(n), w<double>(h_out), B, H);
  else
    EMBER_RNN_CALL(gru_forward, float, w<float>(gh), has_bias ? r<float>(b) : nullptr, r<float>(gi),
                   r<float>(h_prev), w<float>(rz), w<float>(n), w<float>(h_out), B, H);
}

void gru_backward_step(py::array dh, py::array rz, py::array n, py::array gh, py::array h_prev, py::array d_gi,
                       py::array d_gh, py::array dh_direct) {
  const int64_t B = n.ndim() == 2 ? n.shape(0) : 0, H = n.ndim() == 2 ? n.shape(1) : 0;
  check("gru_backward_step", n,
        {{&dh, B * H}, {&rz, 2 * B * H}, {&n, B * H}, {&gh, 3 * B * H}, {&h_prev, B * H}, {&d_gi, 3 * B * H},
         {&d_gh, 3 * B * H}, {&dh_direct, B * H}});
  const bool dbl = is_double(n);
  py::gil_scoped_release release;
  if (dbl)
    EMBER_RNN_CALL(gru_backward, double, r<double>(dh), r<double>(rz), r<double>(n), r<double>(gh), r<double>(h_prev),
                   w<double>(d_gi), w<double>(d_gh), w<double>(dh_direct), B, H);
  else
    EMBER_RNN_CALL(gru_backward, float, r<float>(dh), r<float>(rz), r<float>(n), r<float>(gh), r<float>(h_prev),
                   w<float>(d_gi), w<float>(d_gh), w<float>(dh_direct), B, H);
}

// ------------------------------------------------------------------------------------ whole sequences
// The time loop of one LSTM (or GRU) layer-direction, with each step's h W_hh^T (forward) or d_gates W_hh
// (backward) one call of numpy's cblas gemm at address `gemm` (as blas_split.cpp): per step the Python loop
// cost a numpy matmul call, six array views and a kernel call (about 10% of a 128-wide LSTM step's time),
// which this loop does without the GIL. The products and the gate kernels are the ones the Python loop calls,
// in the same order, so the values are the same (numpy computes a one-row product as a gemv: at batch 1 they
// differ by rounding).

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;  // CBLAS enums

template <typename T, typename I>
using Gemm = void (*)(int, int, int, I, I, I, T, const T*, I, const T*, I, T, T*, I);

// C (m, n) = A (m, k) @ op(W), W row-major (n, k) when trans_w, else (k, n).
template <typename T, typename I>
void product(uintptr_t fn, int64_t m, int64_t n, int64_t k, const T* a, const T* w, bool trans_w, T* c) {
  auto gemm = reinterpret_cast<Gemm<T, I>>(fn);
  gemm(kRowMajor, kNoTrans, trans_w ? kTrans : kNoTrans, static_cast<I>(m), static_cast<I>(n), static_cast<I>(k), T(1),
       a, static_cast<I>(k), w, static_cast<I>(trans_w ? k : n), T(0), c, static_cast<I>(n));
}

// The step in forward order `s` of a direction of `steps` steps: the time index it reads and writes.
inline int64_t time_of(int64_t s, int64_t steps, bool reverse) { return reverse ? steps - 1 - s : s; }

template <typename T, typename I>
void lstm_sequence_forward(uintptr_t fn, const T* pre, const T* w_hh, const T* h0, const T* c0, bool reverse,
                           bool keep, T* acts, T* cells, T* tanh_c, T* out, int64_t steps, int64_t B, int64_t H) {
  const T* h = h0;
  const T* c = c0;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = time_of(s, steps, reverse), k = keep ? t : 0;
    T* a = acts + k * B * 4 * H;
    product<T, I>(fn, B, 4 * H, H, h, w_hh, true, a);
    EMBER_RNN_CALL(lstm_forward, T, a, pre + t * B * 4 * H, c, cells + t * B * H, tanh_c + k * B * H, out + t * B * H,
                   B, H);
    h = out + t * B * H;
    c = cells + t * B * H;
  }
}

template <typename T, typename I>
void lstm_sequence_backward(uintptr_t fn, const T* d_out, const T* acts, const T* tanh_c, const T* cells, const T* c0,
                            const T* w_hh, bool reverse, T* dh, T* dc, T* d_gates, int64_t steps, int64_t B,
                            int64_t H) {
  for (int64_t s = steps - 1; s >= 0; --s) {  // the forward's steps, last first
    const int64_t t = time_of(s, steps, reverse);
    const T* c_prev = s == 0 ? c0 : cells + time_of(s - 1, steps, reverse) * B * H;
    const T* d = d_out + t * B * H;
    for (int64_t j = 0; j < B * H; ++j) dh[j] += d[j];
    T* dg = d_gates + t * B * 4 * H;
    EMBER_RNN_CALL(lstm_backward, T, dh, acts + t * B * 4 * H, tanh_c + t * B * H, c_prev, dc, dg, B, H);
    product<T, I>(fn, B, H, 4 * H, dg, w_hh, false, dh);  // dc now holds c_{t-1}'s gradient
  }
}

template <typename T, typename I>
void gru_sequence_forward(uintptr_t fn, const T* gi, const T* w_hh, const T* b_hh, const T* h0, bool reverse, bool keep,
                          T* gh, T* rz, T* n, T* out, int64_t steps, int64_t B, int64_t H) {
  const T* h = h0;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = time_of(s, steps, reverse), k = keep ? t : 0;
    T* g = gh + k * B * 3 * H;
    product<T, I>(fn, B, 3 * H, H, h, w_hh, true, g);
    EMBER_RNN_CALL(gru_forward, T, g, b_hh, gi + t * B * 3 * H, h, rz + k * B * 2 * H, n + k * B * H, out + t * B * H,
                   B, H);
    h = out + t * B * H;
  }
}

template <typename T, typename I>
void gru_sequence_backward(uintptr_t fn, const T* d_out, const T* gh, const T* rz, const T* n, const T* out,
                           const T* h0, const T* w_hh, bool reverse, T* dh, T* direct, T* d_gi, T* d_gh,
                           int64_t steps, int64_t B, int64_t H) {
  for (int64_t s = steps - 1; s >= 0; --s) {  // the forward's steps, last first
    const int64_t t = time_of(s, steps, reverse);
    const T* h_prev = s == 0 ? h0 : out + time_of(s - 1, steps, reverse) * B * H;
    const T* d = d_out + t * B * H;
    for (int64_t j = 0; j < B * H; ++j) dh[j] += d[j];
    T* dgh = d_gh + t * B * 3 * H;
    EMBER_RNN_CALL(gru_backward, T, dh, rz + t * B * 2 * H, n + t * B * H, gh + t * B * 3 * H, h_prev,
                   d_gi + t * B * 3 * H, dgh, direct, B, H);
    product<T, I>(fn, B, H, 3 * H, dgh, w_hh, false, dh);
    for (int64_t j = 0; j < B * H; ++j) dh[j] += direct[j];
  }
}

// Checks of the sequence entry points: C-contiguous arrays of the first's dtype with the given element counts,
// and a gemm address for the integer width the caller named.
void check_sequence(const char* op, uintptr_t gemm, const py::array& first,
                    std::initializer_list<std::pair<const py::array*, int64_t>> arrays) {
  if (gemm == 0) throw std::invalid_argument(std::string(op) + ": a null gemm address");
  check(op, first, arrays);
}

void lstm_forward_sequence(uintptr_t gemm, bool ilp64, py::array pre, py::array w_hh, py::array h0, py::array c0,
                           bool reverse, py::array acts, py::array cells, py::array tanh_c, py::array out) {
  if (pre.ndim() != 3 || pre.shape(2) % 4 != 0)
    throw std::invalid_argument("lstm_forward_sequence: pre must be (steps, batch, 4 * hidden)");
  const int64_t T = pre.shape(0), B = pre.shape(1), H = pre.shape(2) / 4;
  const bool keep = acts.ndim() == 3 && acts.shape(0) == T;  // else one step's buffers, rewritten each step
  const int64_t K = keep ? T : 1;
  check_sequence("lstm_forward_sequence", gemm, pre,
                 {{&pre, T * B * 4 * H}, {&w_hh, 4 * H * H}, {&h0, B * H}, {&c0, B * H}, {&acts, K * B * 4 * H},
                  {&cells, T * B * H}, {&tanh_c, K * B * H}, {&out, T * B * H}});
  const bool dbl = is_double(pre);
  py::gil_scoped_release release;
#define EMBER_LSTM_FORWARD(TYPE, INT)                                                                             \
  lstm_sequence_forward<TYPE, INT>(gemm, r<TYPE>(pre), r<TYPE>(w_hh), r<TYPE>(h0), r<TYPE>(c0), reverse, keep,    \
                                   w<TYPE>(acts), w<TYPE>(cells), w<TYPE>(tanh_c), w<TYPE>(out), T, B, H)
  if (dbl) {
    if (ilp64) EMBER_LSTM_FORWARD(double, int64_t);
    else EMBER_LSTM_FORWARD(double, int);
  } else {
    if (ilp64) EMBER_LSTM_FORWARD(float, int64_t);
    else EMBER_LSTM_FORWARD(float, int);
  }
#undef EMBER_LSTM_FORWARD
}

void lstm_backward_sequence(uintptr_t gemm, bool ilp64, py::array d_out, py::array acts, py::array tanh_c,
                            py::array cells, py::array c0, py::array w_hh, bool reverse, py::array dh, py::array dc,
                            py::array d_gates) {
  if (acts.ndim() != 3 || acts.shape(2) % 4 != 0)
    throw std::invalid_argument("lstm_backward_sequence: acts must be (steps, batch, 4 * hidden)");
  const int64_t T = acts.shape(0), B = acts.shape(1), H = acts.shape(2) / 4;
  check_sequence("lstm_backward_sequence", gemm, acts,
                 {{&d_out, T * B * H}, {&acts, T * B * 4 * H}, {&tanh_c, T * B * H}, {&cells, T * B * H},
                  {&c0, B * H}, {&w_hh, 4 * H * H}, {&dh, B * H}, {&dc, B * H}, {&d_gates, T * B * 4 * H}});
  const bool dbl = is_double(acts);
  py::gil_scoped_release release;
#define EMBER_LSTM_BACKWARD(TYPE, INT)                                                                              \
  lstm_sequence_backward<TYPE, INT>(gemm, r<TYPE>(d_out), r<TYPE>(acts), r<TYPE>(tanh_c), r<TYPE>(cells), r<TYPE>(c0), \
                                    r<TYPE>(w_hh), reverse, w<TYPE>(dh), w<TYPE>(dc), w<TYPE>(d_gates), T, B, H)
  if (dbl) {
    if (ilp64) EMBER_LSTM_BACKWARD(double, int64_t);
    else EMBER_LSTM_BACKWARD(double, int);
  } else {
    if (ilp64) EMBER_LSTM_BACKWARD(float, int64_t);
    else EMBER_LSTM_BACKWARD(float, int);
  }
#undef EMBER_LSTM_BACKWARD
}

void gru_forward_sequence(uintptr_t gemm, bool ilp64, py::array gi, py::array w_hh, py::object b_hh, py::array h0,
                          bool reverse, py::array gh, py::array rz, py::array n, py::array out) {
  if (gi.ndim() != 3 || gi.shape(2) % 3 != 0)
    throw std::invalid_argument("gru_forward_sequence: gi must be (steps, batch, 3 * hidden)");
  const int64_t T = gi.shape(0), B = gi.shape(1), H = gi.shape(2) / 3;
  const bool keep = gh.ndim() == 3 && gh.shape(0) == T;  // else one step's buffers, rewritten each step
  const int64_t K = keep ? T : 1;
  check_sequence("gru_forward_sequence", gemm, gi,
                 {{&gi, T * B * 3 * H}, {&w_hh, 3 * H * H}, {&h0, B * H}, {&gh, K * B * 3 * H}, {&rz, K * B * 2 * H},
                  {&n, K * B * H}, {&out, T * B * H}});
  py::array bias;
  if (!b_hh.is_none()) {
    bias = py::reinterpret_borrow<py::array>(b_hh);
    check("gru_forward_sequence", gi, {{&bias, 3 * H}});
  }
  const bool has_bias = !b_hh.is_none();
  const bool dbl = is_double(gi);
  py::gil_scoped_release release;
#define EMBER_GRU_FORWARD(TYPE, INT)                                                                                \
  gru_sequence_forward<TYPE, INT>(gemm, r<TYPE>(gi), r<TYPE>(w_hh), has_bias ? r<TYPE>(bias) : nullptr, r<TYPE>(h0), \
                                  reverse, keep, w<TYPE>(gh), w<TYPE>(rz), w<TYPE>(n), w<TYPE>(out), T, B, H)
  if (dbl) {
    if (ilp64) EMBER_GRU_FORWARD(double, int64_t);
    else EMBER_GRU_FORWARD(double, int);
  } else {
    if (ilp64) EMBER_GRU_FORWARD(float, int64_t);
    else EMBER_GRU_FORWARD(float, int);
  }
#undef EMBER_GRU_FORWARD
}

void gru_backward_sequence(uintptr_t gemm, bool ilp64, py::array d_out, py::array gh, py::array rz, py::array n,
                           py::array out, py::array h0, py::array w_hh, bool reverse, py::array dh, py::array d_gi,
                           py::array d_gh) {
  if (gh.ndim() != 3 || gh.shape(2) % 3 != 0)
    throw std::invalid_argument("gru_backward_sequence: gh must be (steps, batch, 3 * hidden)");
  const int64_t T = gh.shape(0), B = gh.shape(1), H = gh.shape(2) / 3;
  check_sequence("gru_backward_sequence", gemm, gh,
                 {{&d_out, T * B * H}, {&gh, T * B * 3 * H}, {&rz, T * B * 2 * H}, {&n, T * B * H}, {&out, T * B * H},
                  {&h0, B * H}, {&w_hh, 3 * H * H}, {&dh, B * H}, {&d_gi, T * B * 3 * H}, {&d_gh, T * B * 3 * H}});
  const bool dbl = is_double(gh);
  py::array direct(gh.dtype(), std::vector<py::ssize_t>{static_cast<py::ssize_t>(B * H)});  // dh z of a step
  py::gil_scoped_release release;
#define EMBER_GRU_BACKWARD(TYPE, INT)                                                                                 \
  gru_sequence_backward<TYPE, INT>(gemm, r<TYPE>(d_out), r<TYPE>(gh), r<TYPE>(rz), r<TYPE>(n), r<TYPE>(out),         \
                                   r<TYPE>(h0), r<TYPE>(w_hh), reverse, w<TYPE>(dh), w<TYPE>(direct), w<TYPE>(d_gi), \
                                   w<TYPE>(d_gh), T, B, H)
  if (dbl) {
    if (ilp64) EMBER_GRU_BACKWARD(double, int64_t);
    else EMBER_GRU_BACKWARD(double, int);
  } else {
    if (ilp64) EMBER_GRU_BACKWARD(float, int64_t);
    else EMBER_GRU_BACKWARD(float, int);
  }
#undef EMBER_GRU_BACKWARD
}

}  // namespace

void init_rnn(py::module_& m) {
  m.def("lstm_forward_sequence", &lstm_forward_sequence, py::arg("gemm"), py::arg("ilp64"), py::arg("pre"),
        py::arg("w_hh"), py::arg("h0"), py::arg("c0"), py::arg("reverse"), py::arg("acts"), py::arg("cells"),
        py::arg("tanh_c"), py::arg("out"),
        "One LSTM layer-direction over all steps: pre (T, B, 4H) = x W_ih^T + biases, w_hh (4H, H), h0 and c0 (B, H); "
        "per step h W_hh^T by the cblas gemm at address `gemm`, then lstm_forward_step's arithmetic. Writes cells, out "
        "(T, B, H) and the activations acts (T, B, 4H) and tanh_c (T, B, H), or only the last step's when they have "
        "one step (nothing kept for backward).");
  m.def("lstm_backward_sequence", &lstm_backward_sequence, py::arg("gemm"), py::arg("ilp64"), py::arg("d_out"),
        py::arg("acts"), py::arg("tanh_c"), py::arg("cells"), py::arg("c0"), py::arg("w_hh"), py::arg("reverse"),
        py::arg("dh"), py::arg("dc"), py::arg("d_gates"),
        "lstm_forward_sequence's backward: d_gates (T, B, 4H) from d_out (T, B, H) and the forward's arrays; dh and dc "
        "(B, H) come in as h_n's and c_n's gradients and leave as h0's and c0's.");
  m.def("gru_forward_sequence", &gru_forward_sequence, py::arg("gemm"), py::arg("ilp64"), py::arg("gi"),
        py::arg("w_hh"), py::arg("b_hh"), py::arg("h0"), py::arg("reverse"), py::arg("gh"), py::arg("rz"), py::arg("n"),
        py::arg("out"),
        "One GRU layer-direction over all steps: gi (T, B, 3H) = x W_ih^T + b_ih, w_hh (3H, H), b_hh (3H) or None, h0 "
        "(B, H); per step h W_hh^T by the cblas gemm at address `gemm`, then gru_forward_step's arithmetic. Writes out "
        "(T, B, H) and gh (T, B, 3H), rz (T, B, 2H), n (T, B, H), or only the last step's when they have one step.");
  m.def("gru_backward_sequence", &gru_backward_sequence, py::arg("gemm"), py::arg("ilp64"), py::arg("d_out"),
        py::arg("gh"), py::arg("rz"), py::arg("n"), py::arg("out"), py::arg("h0"), py::arg("w_hh"), py::arg("reverse"),
        py::arg("dh"), py::arg("d_gi"), py::arg("d_gh"),
        "gru_forward_sequence's backward: d_gi and d_gh (T, B, 3H) from d_out (T, B, H) and the forward's arrays; dh "
        "(B, H) comes in as h_n's gradient and leaves as h0's.");
  m.def("lstm_forward_step", &lstm_forward_step, py::arg("a"), py::arg("pre"), py::arg("c_prev"), py::arg("c_out"),
        py::arg("tanh_c"), py::arg("h_out"),
        "One LSTM step's gates from a = h W_hh^T (in place, (B, 4H)) and pre = x W_ih^T + biases: the activations "
        "i, f, g, o into a, c_out = f c_prev + i g, tanh_c = tanh(c_out), h_out = o tanh_c.");
  m.def("lstm_backward_step", &lstm_backward_step, py::arg("dh"), py::arg("acts"), py::arg("tanh_c"),
        py::arg("c_prev"), py::arg("dc"), py::arg("d_gates"),
        "One LSTM step backward: d_gates (B, 4H) from dh and the forward's activations; dc (in place) becomes "
        "c_{t-1}'s gradient.");
  m.def("gru_forward_step", &gru_forward_step, py::arg("gh"), py::arg("bias"), py::arg("gi"), py::arg("h_prev"),
        py::arg("rz"), py::arg("n"), py::arg("h_out"),
        "One GRU step from gh = h W_hh^T (in place: plus bias), gi = x W_ih^T + b_ih and h_prev: r and z into rz "
        "(B, 2H), n (B, H), h_out = n + z (h_prev - n).");
  m.def("gru_backward_step", &gru_backward_step, py::arg("dh"), py::arg("rz"), py::arg("n"), py::arg("gh"),
        py::arg("h_prev"), py::arg("d_gi"), py::arg("d_gh"), py::arg("dh_direct"),
        "One GRU step backward: d_gi and d_gh (B, 3H) and dh_direct = dh z from dh and the forward's r, z, n, gh.");
}
