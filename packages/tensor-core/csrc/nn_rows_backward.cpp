// CPU gradient kernels of softmax, log_softmax, layer_norm and gelu, which ember-autograd's derivatives
// (derivatives/nn_activation.py, nn_norm.py) call when the backward records nothing, on plain CPU
// float32/float64 tensors (the CPU counterpart of ember.cuda.kernels.rows; csrc/nn_backward.cpp does the
// same for batch_norm). The formulas dispatch 4 (softmax), about 15 (layer_norm: statistics, the normalised
// input, three means and two sums over rows) and 11 (gelu) ops per call; on a transformer block's small
// tensors each op costs more in dispatch than in arithmetic (layer_norm forward + backward was 12x PyTorch's
// time). Each kernel is one pass over rows (softmax, layer_norm; along the contiguous last dim) or elements
// (gelu), float32 computed in float64 and rounded once (wide_math.h's exp and erf), float64 in float64 with
// the C library's functions. Row sums keep eight float64 partial sums added in a fixed order (the same bits
// on every instruction set); rows are independent and layer_norm's column sums add rows in order, so
// results do not depend on the thread count either.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace py = pybind11;

namespace nn_rows_base {
#include "wide_math.h"
#include "nn_rows_kernels.h"
}  // namespace nn_rows_base

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define EMBER_NN_ROWS_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace nn_rows_avx2 {
#include "wide_math.h"
#include "nn_rows_kernels.h"
}  // namespace nn_rows_avx2
#pragma GCC pop_options
#endif

namespace {

bool use_avx2() {
#ifdef EMBER_NN_ROWS_AVX2
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

#ifdef EMBER_NN_ROWS_AVX2
#define EMBER_NN_ROWS_CALL(FN, T, ...) \
  (use_avx2() ? nn_rows_avx2::FN<T>(__VA_ARGS__) : nn_rows_base::FN<T>(__VA_ARGS__))
#else
#define EMBER_NN_ROWS_CALL(FN, T, ...) nn_rows_base::FN<T>(__VA_ARGS__)
#endif

void check_like(const char* op, const py::array& first, const py::array& a, const char* name) {
  if (!a.dtype().is(first.dtype()) || !(a.flags() & py::array::c_style))
    throw std::invalid_argument(std::string(op) + ": '" + name + "' must be C-contiguous with the first array's dtype");
}

bool is_double(const char* op, const py::array& a) {
  if (a.dtype().is(py::dtype::of<double>())) return true;
  if (a.dtype().is(py::dtype::of<float>())) return false;
  throw std::invalid_argument(std::string(op) + ": float32 or float64 arrays only");
}

py::array new_like(const py::array& a) {
  return py::array(a.dtype(), std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
}

template <typename T>
const T* cp(const py::array& a) {
  return static_cast<const T*>(a.data());
}

template <typename T>
T* mp(py::array& a) {
  return static_cast<T*>(a.mutable_data());
}

py::array softmax_backward(py::array y, py::array g, bool log) {
  check_like("softmax_backward", y, y, "y");
  check_like("softmax_backward", y, g, "g");
  if (y.ndim() < 1 || g.size() != y.size()) throw std::invalid_argument("softmax_backward: y and g differ in size");
  const int64_t n = y.shape(y.ndim() - 1), rows = n == 0 ? 0 : y.size() / n;
  py::array dx = new_like(y);
  const bool dbl = is_double("softmax_backward", y);
  py::gil_scoped_release release;
  if (dbl) EMBER_NN_ROWS_CALL(softmax_backward_rows, double, cp<double>(y), cp<double>(g), mp<double>(dx), rows, n, log);
  else EMBER_NN_ROWS_CALL(softmax_backward_rows, float, cp<float>(y), cp<float>(g), mp<float>(dx), rows, n, log);
  return dx;
}

template <typename T>
void layer_norm_typed(const py::array& x, const py::array& g, const py::object& w, double eps, py::array* dx,
                      double* dw, double* db, int64_t rows, int64_t n) {
  std::vector<double> stats(2 * size_t(rows));
  const T* wp = w.is_none() ? nullptr : cp<T>(py::reinterpret_borrow<py::array>(w));
  T* dxp = dx == nullptr ? nullptr : mp<T>(*dx);
  py::gil_scoped_release release;
  EMBER_NN_ROWS_CALL(layer_norm_backward_rows, T, cp<T>(x), cp<T>(g), wp, eps, dxp, dw, db, stats.data(),
                     stats.data() + rows, rows, n);
}

// (dx or None, dw or None, db or None): dw and db in float64, shaped (n,).
py::tuple layer_norm_backward(py::array x, py::array g, py::object w, double eps, bool want_dx, bool want_dw,
                              bool want_db) {
  check_like("layer_norm_backward", x, g, "g");
  if (g.size() != x.size() || x.ndim() < 1) throw std::invalid_argument("layer_norm_backward: x and g differ in size");
  const int64_t n = x.shape(x.ndim() - 1), rows = n == 0 ? 0 : x.size() / n;
  if (!w.is_none()) {
    py::array wa = py::reinterpret_borrow<py::array>(w);
    check_like("layer_norm_backward", x, wa, "w");
    if (wa.size() != n) throw std::invalid_argument("layer_norm_backward: w must have the last dim's size");
  }
  py::object dx_out = py::none(), dw_out = py::none(), db_out = py::none();
  py::array dx;
  py::array_t<double> dw, db;
  if (want_dx) dx = new_like(x);
  if (want_dw) {
    dw = py::array_t<double>(n);
    std::memset(dw.mutable_data(), 0, sizeof(double) * size_t(n));
  }
  if (want_db) {
    db = py::array_t<double>(n);
    std::memset(db.mutable_data(), 0, sizeof(double) * size_t(n));
  }
  double* dwp = want_dw ? dw.mutable_data() : nullptr;
  double* dbp = want_db ? db.mutable_data() : nullptr;
  if (is_double("layer_norm_backward", x))
    layer_norm_typed<double>(x, g, w, eps, want_dx ? &dx : nullptr, dwp, dbp, rows, n);
  else
    layer_norm_typed<float>(x, g, w, eps, want_dx ? &dx : nullptr, dwp, dbp, rows, n);
  if (want_dx) dx_out = dx;
  if (want_dw) dw_out = dw;
  if (want_db) db_out = db;
  return py::make_tuple(dx_out, dw_out, db_out);
}

py::array gelu_backward(py::array g, py::array x, bool tanh_form) {
  check_like("gelu_backward", x, x, "x");
  check_like("gelu_backward", x, g, "g");
  if (g.size() != x.size()) throw std::invalid_argument("gelu_backward: g and x differ in size");
  py::array dx = new_like(x);
  const int64_t count = x.size();
  const bool dbl = is_double("gelu_backward", x);
  py::gil_scoped_release release;
  if (dbl) EMBER_NN_ROWS_CALL(gelu_backward_array, double, cp<double>(g), cp<double>(x), mp<double>(dx), count, tanh_form);
  else EMBER_NN_ROWS_CALL(gelu_backward_array, float, cp<float>(g), cp<float>(x), mp<float>(dx), count, tanh_form);
  return dx;
}

py::array softmax_rows(py::array x, bool log) {
  check_like("softmax_rows", x, x, "x");
  if (x.ndim() < 1) throw std::invalid_argument("softmax_rows: x must have a last dim");
  const int64_t n = x.shape(x.ndim() - 1), rows = n == 0 ? 0 : x.size() / n;
  py::array y = new_like(x);
  const bool dbl = is_double("softmax_rows", x);
  py::gil_scoped_release release;
  if (dbl) EMBER_NN_ROWS_CALL(softmax_forward_rows, double, cp<double>(x), mp<double>(y), rows, n, log);
  else EMBER_NN_ROWS_CALL(softmax_forward_rows, float, cp<float>(x), mp<float>(y), rows, n, log);
  return y;
}

py::array layer_norm_rows(py::array x, py::object w, py::object b, double eps) {
  check_like("layer_norm_rows", x, x, "x");
  if (x.ndim() < 1) throw std::invalid_argument("layer_norm_rows: x must have a last dim");
  const int64_t n = x.shape(x.ndim() - 1), rows = n == 0 ? 0 : x.size() / n;
  py::array wa, ba;
  if (!w.is_none()) {
    wa = py::reinterpret_borrow<py::array>(w);
    check_like("layer_norm_rows", x, wa, "w");
    if (wa.size() != n) throw std::invalid_argument("layer_norm_rows: w must have the last dim's size");
  }
  if (!b.is_none()) {
    ba = py::reinterpret_borrow<py::array>(b);
    check_like("layer_norm_rows", x, ba, "b");
    if (ba.size() != n) throw std::invalid_argument("layer_norm_rows: b must have the last dim's size");
  }
  py::array y = new_like(x);
  const bool dbl = is_double("layer_norm_rows", x);
  const bool has_w = !w.is_none(), has_b = !b.is_none();
  py::gil_scoped_release release;
  if (dbl)
    EMBER_NN_ROWS_CALL(layer_norm_forward_rows, double, cp<double>(x), has_w ? cp<double>(wa) : nullptr,
                       has_b ? cp<double>(ba) : nullptr, eps, mp<double>(y), rows, n);
  else
    EMBER_NN_ROWS_CALL(layer_norm_forward_rows, float, cp<float>(x), has_w ? cp<float>(wa) : nullptr,
                       has_b ? cp<float>(ba) : nullptr, eps, mp<float>(y), rows, n);
  return y;
}

}  // namespace

void init_nn_rows_backward(py::module_& m) {
  m.def("softmax_rows", &softmax_rows, py::arg("x"), py::arg("log"),
        "Softmax (log=True: log-softmax) along the last dim of a C-contiguous float32/float64 array, one row "
        "after the other (for short rows; float64 sums, float32 exponentials in float64).");
  m.def("layer_norm_rows", &layer_norm_rows, py::arg("x"), py::arg("w"), py::arg("b"), py::arg("eps"),
        "layer_norm over the last dim of a C-contiguous float32/float64 array with optional weight and bias of "
        "its size (float64 statistics, each element rounded once).");
  m.def("softmax_backward", &softmax_backward, py::arg("y"), py::arg("g"), py::arg("log"),
        "softmax's (log=False: y (g - sum(g y))) or log_softmax's (g - exp(y) sum(g)) input gradient along the "
        "last dim of C-contiguous float32/float64 arrays y (the output) and g.");
  m.def("layer_norm_backward", &layer_norm_backward, py::arg("x"), py::arg("g"), py::arg("w"), py::arg("eps"),
        py::arg("want_dx"), py::arg("want_dw"), py::arg("want_db"),
        "layer_norm's gradients over the last dim: (dx or None, dw or None, db or None), dw and db float64 (n,).");
  m.def("gelu_backward", &gelu_backward, py::arg("g"), py::arg("x"), py::arg("tanh_form"),
        "gelu's input gradient (exact, or the tanh approximation) of C-contiguous float32/float64 arrays.");
}
