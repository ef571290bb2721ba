// Gradients of 2-D depthwise convolutions (groups == channels, one output channel per group: MobileNet's and
// EfficientNet's 3x3 and 5x5 layers), called by ember-autograd's convolution derivative when the backward
// records nothing (derivatives/nn_conv.py).
//
// Before, the weight gradient ran as a grouped convolution whose "kernel" is the output gradient (one group
// per sample and channel): its direct kernel looped over oH x oW taps with output rows of kH entries, about
// 2.5 ms per MobileNet layer against PyTorch's 0.55 ms for the whole backward; the strided layers' input
// gradient went through a transposed convolution (1.1 ms). Here the weight gradient is, per channel and tap,
// one float64 dot product of each output-gradient row with the input row it met (eight partial sums in a
// fixed order), and the input gradient scatters each output-gradient row into the input rows of each tap,
// taps in order. Channels (weight) and planes (input) are split over ember's OpenMP threads, so results do
// not depend on the thread count; both are compiled for the x86-64 baseline and AVX2 (without contraction:
// the same bits), picked at run time.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace depthwise_base {
#include "depthwise_kernels.h"
}  // namespace depthwise_base

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define EMBER_DEPTHWISE_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace depthwise_avx2 {
#include "depthwise_kernels.h"
}  // namespace depthwise_avx2
#pragma GCC pop_options
#endif

namespace {

bool use_avx2() {
#ifdef EMBER_DEPTHWISE_AVX2
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

#ifdef EMBER_DEPTHWISE_AVX2
#define EMBER_DEPTHWISE_CALL(FN, T, ...) \
  (use_avx2() ? depthwise_avx2::FN<T>(__VA_ARGS__) : depthwise_base::FN<T>(__VA_ARGS__))
#else
#define EMBER_DEPTHWISE_CALL(FN, T, ...) depthwise_base::FN<T>(__VA_ARGS__)
#endif

struct Geometry {
  int64_t N, C, H, W, oH, oW, kH, kW, sh, sw, ph, pw, dh, dw;
};

// Checks the arrays (C-contiguous, one float dtype, 4-D) and the output size the parameters imply.
Geometry geometry(const char* op, const py::array& x_like, const py::array& gy, int64_t kH, int64_t kW,
                  std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation) {
  auto fail = [op](const char* what) { throw std::invalid_argument(std::string(op) + ": " + what); };
  if (stride.size() != 2 || padding.size() != 2 || dilation.size() != 2) fail("stride, padding, dilation: 2 each");
  if (x_like.ndim() != 4 || gy.ndim() != 4) fail("4-D arrays expected");
  if (!(gy.flags() & py::array::c_style)) fail("arrays must be C-contiguous");
  if (!x_like.dtype().is(gy.dtype())) fail("arrays of one dtype expected");
  Geometry g{x_like.shape(0), x_like.shape(1), x_like.shape(2), x_like.shape(3), gy.shape(2), gy.shape(3), kH, kW,
             stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1]};
  if (gy.shape(0) != g.N || gy.shape(1) != g.C) fail("input and output gradient differ in batch or channels");
  if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.ph < 0 || g.pw < 0 || kH < 1 || kW < 1) fail("bad parameters");
  const int64_t oH = (g.H + 2 * g.ph - g.dh * (kH - 1) - 1) / g.sh + 1;
  const int64_t oW = (g.W + 2 * g.pw - g.dw * (kW - 1) - 1) / g.sw + 1;
  if (oH != g.oH || oW != g.oW) fail("the output gradient's size does not match the parameters");
  return g;
}

bool is_double(const py::array& a) {
  if (a.dtype().is(py::dtype::of<double>())) return true;
  if (a.dtype().is(py::dtype::of<float>())) return false;
  throw std::invalid_argument("depthwise kernels take float32 or float64 arrays");
}

py::array weight_grad(py::array x, py::array gy, int64_t kH, int64_t kW, std::vector<int64_t> stride,
                      std::vector<int64_t> padding, std::vector<int64_t> dilation) {
  if (!(x.flags() & py::array::c_style)) throw std::invalid_argument("depthwise_weight_grad: x must be C-contiguous");
  const Geometry g = geometry("depthwise_weight_grad", x, gy, kH, kW, stride, padding, dilation);
  py::array out(x.dtype(), std::vector<py::ssize_t>{g.C, 1, kH, kW});
  const bool dbl = is_double(x);
  py::gil_scoped_release release;
  if (dbl)
    EMBER_DEPTHWISE_CALL(depthwise_weight_grad, double, static_cast<const double*>(x.data()),
                         static_cast<const double*>(gy.data()), static_cast<double*>(out.mutable_data()), g.N, g.C,
                         g.H, g.W, g.oH, g.oW, kH, kW, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw);
  else
    EMBER_DEPTHWISE_CALL(depthwise_weight_grad, float, static_cast<const float*>(x.data()),
                         static_cast<const float*>(gy.data()), static_cast<float*>(out.mutable_data()), g.N, g.C,
                         g.H, g.W, g.oH, g.oW, kH, kW, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw);
  return out;
}

py::array input_grad(py::array gy, py::array weight, std::vector<int64_t> input_size, std::vector<int64_t> stride,
                     std::vector<int64_t> padding, std::vector<int64_t> dilation) {
  if (input_size.size() != 2) throw std::invalid_argument("depthwise_input_grad: input_size must be (H, W)");
  if (weight.ndim() != 4 || !(weight.flags() & py::array::c_style) || !weight.dtype().is(gy.dtype()) ||
      weight.shape(1) != 1 || (gy.ndim() == 4 && weight.shape(0) != gy.shape(1)))
    throw std::invalid_argument("depthwise_input_grad: weight must be C-contiguous (C, 1, kH, kW) of gy's dtype");
  py::array dx(gy.dtype(), std::vector<py::ssize_t>{gy.ndim() == 4 ? gy.shape(0) : 0, gy.ndim() == 4 ? gy.shape(1) : 0,
                                                     input_size[0], input_size[1]});
  const int64_t kH = weight.shape(2), kW = weight.shape(3);
  const Geometry g = geometry("depthwise_input_grad", dx, gy, kH, kW, stride, padding, dilation);
  const bool dbl = is_double(gy);
  py::gil_scoped_release release;
  if (dbl)
    EMBER_DEPTHWISE_CALL(depthwise_input_grad, double, static_cast<const double*>(gy.data()),
                         static_cast<const double*>(weight.data()), static_cast<double*>(dx.mutable_data()), g.N,
                         g.C, g.H, g.W, g.oH, g.oW, kH, kW, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw);
  else
    EMBER_DEPTHWISE_CALL(depthwise_input_grad, float, static_cast<const float*>(gy.data()),
                         static_cast<const float*>(weight.data()), static_cast<float*>(dx.mutable_data()), g.N, g.C,
                         g.H, g.W, g.oH, g.oW, kH, kW, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw);
  return dx;
}

}  // namespace

void init_depthwise(py::module_& m) {
  m.def("depthwise_weight_grad", &weight_grad, py::arg("x"), py::arg("gy"), py::arg("kh"), py::arg("kw"),
        py::arg("stride"), py::arg("padding"), py::arg("dilation"),
        "The (C, 1, kH, kW) weight gradient of a 2-D depthwise convolution from its input x (N, C, H, W) and "
        "output gradient gy (N, C, oH, oW), C-contiguous float32/float64.");
  m.def("depthwise_input_grad", &input_grad, py::arg("gy"), py::arg("weight"), py::arg("input_size"),
        py::arg("stride"), py::arg("padding"), py::arg("dilation"),
        "The (N, C, H, W) input gradient of a 2-D depthwise convolution from its output gradient gy (N, C, oH, oW) "
        "and weight (C, 1, kH, kW), C-contiguous float32/float64.");
}
