// Gradient kernels of nn ops whose derivative formulas, written in ember ops, make many passes over
// an activation: batch_norm in training mode, threshold (relu's backward) and max pooling.
//
// batch_norm_backward (ember-autograd's derivative of batch_norm calls it on CPU tensors when the
// backward records nothing). The formula in ember/autograd/derivatives/nn_norm.py recomputes the
// statistics (var_mean), the normalised input and four per-channel sums over the batch and spatial
// dims (each a transposed copy and a reduction), about a dozen passes over the activation; on the
// demo's (64, 64, 8, 8) activations that was 2.1 ms against PyTorch's 0.2 ms. Here, per channel c of
// x seen as (N, C, S), with M = N * S elements and d = x - mean:
//
//   pass 1: mean = sum(x) / M
//   pass 2: var = sum(d * d) / M, sum_g = sum(g), sum_gd = sum(g * d);  invstd = 1 / sqrt(var + eps)
//   pass 3: dx = w * invstd * (g - sum_g / M - d * sum_gd * invstd^2 / M)
//
// with d_bias = sum_g and d_weight = sum_gd * invstd, the formula's values rearranged. Sums run over
// each contiguous run of S elements in vector lanes of the input's type, and each run's total is
// added to a float64 accumulator (so float32 error grows with S, not with M); the per-channel scalars
// are computed in float64 and pass 3 in the input's type. Channels are independent, so the results do
// not depend on the thread count; large inputs split the channels over ember's OpenMP threads.
//
// threshold_backward (the op's CPU kernel for two contiguous arrays of one float dtype): grad where
// y > threshold, else +0.0, in one pass (numpy needs three: compare, mask, and).
//
// max_pool_backward (the derivative of the max pools when the backward records nothing): each
// plane's output gradients added at the flat input positions the forward's indices name, into a
// zeroed plane, in the order of the outputs (the scatter_add of the formula, without its checks,
// broadcasting and general index layout).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

// Below this many elements the channels run on the calling thread (a parallel region costs more).
constexpr int64_t kParallelElements = int64_t(1) << 16;

template <typename T>
double run_sum(const T* x, int64_t n) {
  T s = T(0);
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return double(s);
}

template <typename T>
void channel_backward(const T* x, const T* g, T* dx, int64_t N, int64_t C, int64_t S, int64_t c, double w, double eps,
                      double* d_weight, double* d_bias) {
  const int64_t M = N * S;
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) total += run_sum(x + (n * C + c) * S, S);
  const T mean = T(total / double(M));
  double sum_dd = 0.0, sum_g = 0.0, sum_gd = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const T* xr = x + (n * C + c) * S;
    const T* gr = g + (n * C + c) * S;
    T dd = T(0), gs = T(0), gd = T(0);
#pragma omp simd reduction(+ : dd, gs, gd)
    for (int64_t i = 0; i < S; ++i) {
      const T d = xr[i] - mean;
      dd += d * d;
      gs += gr[i];
      gd += gr[i] * d;
    }
    sum_dd += double(dd);
    sum_g += double(gs);
    sum_gd += double(gd);
  }
  const double invstd = 1.0 / std::sqrt(sum_dd / double(M) + eps);
  *d_bias = sum_g;
  *d_weight = sum_gd * invstd;
  if (dx == nullptr) return;
  const T scale = T(w * invstd);
  const T shift = T(sum_g / double(M));
  const T slope = T(sum_gd * invstd * invstd / double(M));
  for (int64_t n = 0; n < N; ++n) {
    const int64_t at = (n * C + c) * S;
    const T* xr = x + at;
    const T* gr = g + at;
    T* out = dx + at;
#pragma omp simd
    for (int64_t i = 0; i < S; ++i) out[i] = scale * (gr[i] - shift - (xr[i] - mean) * slope);
  }
}

template <typename T>
void backward_typed(const py::array& x, const py::array& g, const py::object& weight, double eps, py::array* dx,
                    py::array& d_weight, py::array& d_bias) {
  const int64_t N = x.shape(0), C = x.shape(1);
  const int64_t S = N * C == 0 ? 0 : x.size() / (N * C);
  const T* xp = static_cast<const T*>(x.data());
  const T* gp = static_cast<const T*>(g.data());
  const T* wp = weight.is_none() ? nullptr : static_cast<const T*>(py::cast<py::array>(weight).data());
  T* dxp = dx ? static_cast<T*>(dx->mutable_data()) : nullptr;
  T* dwp = static_cast<T*>(d_weight.mutable_data());
  T* dbp = static_cast<T*>(d_bias.mutable_data());
  py::gil_scoped_release release;
#pragma omp parallel for schedule(static) if (x.size() >= kParallelElements)
  for (int64_t c = 0; c < C; ++c) {
    double dw = 0.0, db = 0.0;
    channel_backward(xp, gp, dxp, N, C, S, c, wp ? double(wp[c]) : 1.0, eps, &dw, &db);
    dwp[c] = T(dw);
    dbp[c] = T(db);
  }
}

bool c_contiguous(const py::array& a) { return (a.flags() & py::array::c_style) != 0; }

// Returns (d_input or None, d_weight, d_bias); d_weight is the gradient of the scale whether or not
// the call had a weight (the caller drops what it does not need).
py::tuple batch_norm_backward(py::array x, py::array g, py::object weight, double eps, bool need_input) {
  if (x.ndim() < 2) throw std::invalid_argument("batch_norm_backward: input must have a channel dim (N, C, ...)");
  if (!c_contiguous(x) || !c_contiguous(g)) throw std::invalid_argument("batch_norm_backward: arrays must be C-contiguous");
  if (!x.dtype().is(g.dtype()) || x.ndim() != g.ndim()) throw std::invalid_argument("batch_norm_backward: grad and input differ");
  for (py::ssize_t i = 0; i < x.ndim(); ++i)
    if (x.shape(i) != g.shape(i)) throw std::invalid_argument("batch_norm_backward: grad and input differ in shape");
  const py::ssize_t C = x.shape(1);
  if (!weight.is_none()) {
    py::array w = py::cast<py::array>(weight);
    if (!w.dtype().is(x.dtype()) || w.ndim() != 1 || w.shape(0) != C || !c_contiguous(w))
      throw std::invalid_argument("batch_norm_backward: weight must be a contiguous (C,) array of the input's dtype");
  }
  py::array d_input = need_input ? py::array(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()))
                                 : py::array();
  py::array d_weight(x.dtype(), std::vector<py::ssize_t>{C});
  py::array d_bias(x.dtype(), std::vector<py::ssize_t>{C});
  py::array* dx = need_input ? &d_input : nullptr;
  if (x.dtype().is(py::dtype::of<float>()))
    backward_typed<float>(x, g, weight, eps, dx, d_weight, d_bias);
  else if (x.dtype().is(py::dtype::of<double>()))
    backward_typed<double>(x, g, weight, eps, dx, d_weight, d_bias);
  else
    throw std::invalid_argument("batch_norm_backward: float32 or float64 only");
  return py::make_tuple(need_input ? py::object(d_input) : py::object(py::none()), d_weight, d_bias);
}

// batch_norm_forward_train: training-mode batch_norm's output and batch statistics in three passes per
// channel, the numpy path of ember/_ops/nn_norm.py (_batch_norm_cpu) in one call: its three channel means,
// the centring, the square and the affine pass each cost a numpy call and a temporary, 140-370 us per call on
// the model suite's small activations against PyTorch's 27-90 us. The same arithmetic: mean = sum(x) / M
// rounded to T; d = x - mean in T; offset = sum(d) / M and var = max(sum(d * d) / M - offset^2, 0) (runs
// summed in T, totals in float64); the per-channel scale = w / sqrt(var + eps) and shift = b - offset * scale
// in float64, rounded to T; out = d * scale + shift in T. Returns the float64 batch mean (mean + offset) and
// biased variance per channel for the running statistics.
template <typename T>
void forward_train_typed(const T* x, const T* w, const T* b, T* out, double* mean_out, double* var_out, int64_t N,
                         int64_t C, int64_t S, double eps) {
  const int64_t M = N * S;
  py::gil_scoped_release release;
#pragma omp parallel for schedule(static) if (N * C * S >= kParallelElements)
  for (int64_t c = 0; c < C; ++c) {
    double total = 0.0;
    for (int64_t n = 0; n < N; ++n) total += run_sum(x + (n * C + c) * S, S);
    const T mean = T(T(total) / T(M));
    double sum_d = 0.0, sum_dd = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = x + (n * C + c) * S;
      T sd = T(0), sdd = T(0);
#pragma omp simd reduction(+ : sd, sdd)
      for (int64_t i = 0; i < S; ++i) {
        const T d = xr[i] - mean;
        sd += d;
        sdd += d * d;
      }
      sum_d += double(sd);
      sum_dd += double(sdd);
    }
    const double offset = double(T(sum_d) / T(M));
    const double var = std::max(double(T(sum_dd) / T(M)) - offset * offset, 0.0);
    double scale = 1.0 / std::sqrt(var + eps);
    if (w) scale *= double(w[c]);
    const double shift = (b ? double(b[c]) : 0.0) - offset * scale;
    const T scale_t = T(scale), shift_t = T(shift);
    for (int64_t n = 0; n < N; ++n) {
      const T* xr = x + (n * C + c) * S;
      T* o = out + (n * C + c) * S;
#pragma omp simd
      for (int64_t i = 0; i < S; ++i) o[i] = (xr[i] - mean) * scale_t + shift_t;
    }
    mean_out[c] = double(mean) + offset;
    var_out[c] = var;
  }
}

// x (N, C, ...) C-contiguous float32/float64; weight and bias (C,) of x's dtype or None.
py::tuple batch_norm_forward_train(py::array x, py::object weight, py::object bias, double eps) {
  if (x.ndim() < 2) throw std::invalid_argument("batch_norm_forward_train: input must have a channel dim (N, C, ...)");
  if (!c_contiguous(x)) throw std::invalid_argument("batch_norm_forward_train: input must be C-contiguous");
  const py::ssize_t N = x.shape(0), C = x.shape(1);
  const int64_t S = N * C == 0 ? 0 : x.size() / (N * C);
  auto param = [&](const py::object& p, const char* name) -> py::array {
    if (p.is_none()) return py::array();
    py::array a = py::cast<py::array>(p);
    if (!a.dtype().is(x.dtype()) || a.ndim() != 1 || a.shape(0) != C || !c_contiguous(a))
      throw std::invalid_argument(std::string("batch_norm_forward_train: ") + name +
                                  " must be a contiguous (C,) array of the input's dtype");
    return a;
  };
  py::array w = param(weight, "weight"), b = param(bias, "bias");
  py::array out(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  py::array_t<double> mean(std::vector<py::ssize_t>{C}), var(std::vector<py::ssize_t>{C});
  if (x.dtype().is(py::dtype::of<float>()))
    forward_train_typed<float>(static_cast<const float*>(x.data()), weight.is_none() ? nullptr : static_cast<const float*>(w.data()),
                               bias.is_none() ? nullptr : static_cast<const float*>(b.data()),
                               static_cast<float*>(out.mutable_data()), mean.mutable_data(), var.mutable_data(), N, C, S, eps);
  else if (x.dtype().is(py::dtype::of<double>()))
    forward_train_typed<double>(static_cast<const double*>(x.data()), weight.is_none() ? nullptr : static_cast<const double*>(w.data()),
                                bias.is_none() ? nullptr : static_cast<const double*>(b.data()),
                                static_cast<double*>(out.mutable_data()), mean.mutable_data(), var.mutable_data(), N, C, S, eps);
  else
    throw std::invalid_argument("batch_norm_forward_train: float32 or float64 only");
  return py::make_tuple(out, mean, var);
}

template <typename T>
void threshold_backward_typed(const T* g, const T* y, T* out, int64_t n, T threshold) {
  constexpr int64_t kBlock = int64_t(1) << 14;
  py::gil_scoped_release release;
  // blocks over the threads, vector lanes within a block (an if clause on a combined "parallel for simd"
  // would switch the vectorisation off with the threads)
#pragma omp parallel for schedule(static) if (n >= 4 * kParallelElements)
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
#pragma omp simd
    for (int64_t i = start; i < end; ++i) {
      const T gi = g[i];  // loaded unconditionally, so that the select below is a vector blend, not a branch
      out[i] = y[i] <= threshold ? T(0) : gi;
    }
  }
}

py::array threshold_backward(py::array grad, py::array y, double threshold) {
  if (!c_contiguous(grad) || !c_contiguous(y) || !grad.dtype().is(y.dtype()) || grad.size() != y.size())
    throw std::invalid_argument("threshold_backward: grad and y must be C-contiguous arrays of one dtype and size");
  py::array out(grad.dtype(), std::vector<py::ssize_t>(grad.shape(), grad.shape() + grad.ndim()));
  if (grad.dtype().is(py::dtype::of<float>()))
    threshold_backward_typed(static_cast<const float*>(grad.data()), static_cast<const float*>(y.data()),
                             static_cast<float*>(out.mutable_data()), grad.size(), float(threshold));
  else if (grad.dtype().is(py::dtype::of<double>()))
    threshold_backward_typed(static_cast<const double*>(grad.data()), static_cast<const double*>(y.data()),
                             static_cast<double*>(out.mutable_data()), grad.size(), threshold);
  else
    throw std::invalid_argument("threshold_backward: float32 or float64 only");
  return out;
}

template <typename T>
// Returns false if an index lies outside its plane (that output is skipped).
bool max_pool_backward_typed(const T* g, const int64_t* idx, T* out, int64_t planes, int64_t cells, int64_t size) {
  py::gil_scoped_release release;
  bool bad = false;
#pragma omp parallel for schedule(static) if (planes * (cells + size) >= kParallelElements) reduction(|| : bad)
  for (int64_t p = 0; p < planes; ++p) {
    T* plane = out + p * size;
    std::fill(plane, plane + size, T(0));
    const T* gp = g + p * cells;
    const int64_t* ip = idx + p * cells;
    for (int64_t o = 0; o < cells; ++o) {
      const int64_t at = ip[o];
      if (at < 0 || at >= size) {
        bad = true;
        continue;
      }
      plane[at] += gp[o];
    }
  }
  return !bad;
}

// grad and indices (planes, cells) C-contiguous; returns (planes, size) of grad's dtype.
py::array max_pool_backward(py::array grad, py::array indices, int64_t size) {
  if (!c_contiguous(grad) || !c_contiguous(indices) || grad.ndim() != 2 || indices.ndim() != 2 ||
      grad.shape(0) != indices.shape(0) || grad.shape(1) != indices.shape(1) ||
      !indices.dtype().is(py::dtype::of<int64_t>()) || size < 0)
    throw std::invalid_argument("max_pool_backward: grad and int64 indices must be C-contiguous (planes, cells) arrays");
  const int64_t planes = grad.shape(0), cells = grad.shape(1);
  py::array out(grad.dtype(), std::vector<py::ssize_t>{planes, size});
  const int64_t* ip = static_cast<const int64_t*>(indices.data());
  bool ok = false;
  if (grad.dtype().is(py::dtype::of<float>()))
    ok = max_pool_backward_typed(static_cast<const float*>(grad.data()), ip, static_cast<float*>(out.mutable_data()), planes,
                            cells, size);
  else if (grad.dtype().is(py::dtype::of<double>()))
    ok = max_pool_backward_typed(static_cast<const double*>(grad.data()), ip, static_cast<double*>(out.mutable_data()),
                            planes, cells, size);
  else
    throw std::invalid_argument("max_pool_backward: float32 or float64 only");
  if (!ok) throw std::out_of_range("max_pool_backward: an index lies outside its input plane");
  return out;
}

}  // namespace

void init_nn_backward(py::module_& m) {
  m.def("batch_norm_forward_train", &batch_norm_forward_train, py::arg("x"), py::arg("weight"), py::arg("bias"),
        py::arg("eps"),
        "Training-mode batch_norm of a C-contiguous float32/float64 (N, C, ...) array: (output, float64 batch mean, "
        "float64 biased batch variance), per channel, as ember/_ops/nn_norm.py's numpy path computes them.");
  m.def("batch_norm_backward", &batch_norm_backward, py::arg("x"), py::arg("grad"), py::arg("weight"), py::arg("eps"),
        py::arg("need_input"),
        "The gradients (d input or None, d weight, d bias) of training-mode batch_norm of the C-contiguous float32/"
        "float64 input x (N, C, ...) with output gradient grad, per-channel weight (C,) or None, and eps; the "
        "statistics are the input's own (biased variance).");
  m.def("threshold_backward", &threshold_backward, py::arg("grad"), py::arg("y"), py::arg("threshold"),
        "grad where y > threshold, else 0: C-contiguous float32/float64 arrays of one dtype and size (a new array).");
  m.def("max_pool_backward", &max_pool_backward, py::arg("grad"), py::arg("indices"), py::arg("size"),
        "The input gradient (planes, size) of a max pool: grad (planes, cells) added at the flat positions that the "
        "int64 indices (planes, cells) name in each plane of size elements.");
}
