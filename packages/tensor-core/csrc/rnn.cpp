// Gate arithmetic of one time step of nn.LSTM and nn.GRU, forward and backward
// (ember/nn/modules/_rnn_fused.py runs the time loop and the h W_hh^T products through numpy's BLAS).
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

}  // namespace

void init_rnn(py::module_& m) {
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
