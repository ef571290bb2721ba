// ember._C: kernels that numpy lacks or runs slowly.
//
// Each kernel works on contiguous numpy buffers handed over by the Python
// kernel in ember/_ops; shape and dtype checks happen before, in the op's
// meta function, so these functions only check what protects memory.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <complex>
#include <cstdint>
#include <stdexcept>
#include <string>

#ifdef EMBER_HAS_OPENMP
#include <omp.h>
#endif

namespace py = pybind11;

void init_conv(py::module_& m);
void init_reduce(py::module_& m);
void init_nn_kernels(py::module_& m);
void init_optim(py::module_& m);
void init_random(py::module_& m);
void init_pointwise(py::module_& m);
void init_engine(py::module_& m);  // engine.cpp: ember-autograd's backward loop
void init_record(py::module_& m);  // record.cpp: ember-autograd's positional recorder
void init_nn_backward(py::module_& m);  // nn_backward.cpp: gradient kernels of batch_norm, relu, max pooling
void init_rnn(py::module_& m);  // rnn.cpp: the gate arithmetic of one LSTM/GRU time step
void init_erf(py::module_& m);  // erf.cpp: ember.erf of float32/float64 arrays
void init_nn_rows_backward(py::module_& m);  // nn_rows_backward.cpp: softmax/layer_norm/gelu gradients
void init_depthwise(py::module_& m);  // depthwise.cpp: 2-D depthwise convolution gradients
void init_blas_split(py::module_& m);  // blas_split.cpp: matrix products split over the OpenMP threads
void init_attention(py::module_& m);  // attention.cpp: scaled dot-product attention by blocks of query rows

namespace {

int get_num_threads() {
#ifdef EMBER_HAS_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("set_num_threads: expected a positive number of threads, got " + std::to_string(n));
#ifdef EMBER_HAS_OPENMP
  omp_set_num_threads(n);
#endif
}

// target[index[i]] += values[i] for every i, with repeated indices accumulating.
// target is the flat (contiguous) destination; index holds flat int64 positions.
template <typename T>
void index_accumulate_typed(py::array target, py::array index, py::array values) {
  auto t = target.mutable_unchecked<T, 1>();
  auto idx = index.unchecked<int64_t, 1>();
  auto v = values.unchecked<T, 1>();
  const int64_t n = idx.shape(0);
  const int64_t size = t.shape(0);
  if (v.shape(0) != n) throw std::invalid_argument("index_accumulate: index and values differ in length");
  for (int64_t i = 0; i < n; ++i) {
    int64_t j = idx(i);
    if (j < 0 || j >= size) throw std::out_of_range("index_accumulate: index " + std::to_string(j) + " out of range for size " + std::to_string(size));
    t(j) += v(i);
  }
}

void index_accumulate(py::array target, py::array index, py::array values) {
  if (!(target.flags() & py::array::c_style) || !(values.flags() & py::array::c_style) || !(index.flags() & py::array::c_style))
    throw std::invalid_argument("index_accumulate: arrays must be C-contiguous");
  if (!index.dtype().is(py::dtype::of<int64_t>())) throw std::invalid_argument("index_accumulate: index must be int64");
  if (!target.dtype().is(values.dtype())) throw std::invalid_argument("index_accumulate: target and values differ in dtype");
  auto dt = target.dtype();
  if (dt.is(py::dtype::of<float>())) return index_accumulate_typed<float>(target, index, values);
  if (dt.is(py::dtype::of<double>())) return index_accumulate_typed<double>(target, index, values);
  if (dt.is(py::dtype::of<int64_t>())) return index_accumulate_typed<int64_t>(target, index, values);
  if (dt.is(py::dtype::of<int32_t>())) return index_accumulate_typed<int32_t>(target, index, values);
  if (dt.is(py::dtype::of<int16_t>())) return index_accumulate_typed<int16_t>(target, index, values);
  if (dt.is(py::dtype::of<int8_t>())) return index_accumulate_typed<int8_t>(target, index, values);
  if (dt.is(py::dtype::of<uint8_t>())) return index_accumulate_typed<uint8_t>(target, index, values);
  if (dt.is(py::dtype::of<std::complex<float>>())) return index_accumulate_typed<std::complex<float>>(target, index, values);
  if (dt.is(py::dtype::of<std::complex<double>>())) return index_accumulate_typed<std::complex<double>>(target, index, values);
  throw std::invalid_argument("index_accumulate: unsupported dtype");
}

// target[index[i] * row + k] += values[i * row + k] for every i and k < row: rows of `row` elements added
// whole (index_add's slices, the embedding gradient), each output element receiving its rows in the order of
// i as the element-wise loop above adds them. index holds row numbers of target viewed as (rows, row).
template <typename T>
void accumulate_rows(T* t, int64_t rows, const int64_t* idx, int64_t n, const T* v, int64_t row) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = idx[i];
    if (j < 0 || j >= rows)
      throw std::out_of_range("index_accumulate_rows: row " + std::to_string(j) + " out of range for " +
                              std::to_string(rows) + " rows");
    T* __restrict__ dst = t + j * row;
    const T* __restrict__ src = v + i * row;
#pragma GCC ivdep
    for (int64_t k = 0; k < row; ++k) dst[k] += src[k];
  }
}

template <typename T>
void index_accumulate_rows_typed(py::array target, py::array index, py::array values, int64_t row) {
  T* t = static_cast<T*>(target.mutable_data());  // (raises for a read-only target, with the GIL held)
  const T* v = static_cast<const T*>(values.data());
  const int64_t* idx = static_cast<const int64_t*>(index.data());
  const int64_t n = index.size(), rows = target.size() / row;
  if (values.size() != n * row) throw std::invalid_argument("index_accumulate_rows: values must hold index.size rows");
  py::gil_scoped_release release;
  accumulate_rows<T>(t, rows, idx, n, v, row);
}

void index_accumulate_rows(py::array target, py::array index, py::array values, int64_t row) {
  if (!(target.flags() & py::array::c_style) || !(values.flags() & py::array::c_style) || !(index.flags() & py::array::c_style))
    throw std::invalid_argument("index_accumulate_rows: arrays must be C-contiguous");
  if (!index.dtype().is(py::dtype::of<int64_t>())) throw std::invalid_argument("index_accumulate_rows: index must be int64");
  if (!target.dtype().is(values.dtype())) throw std::invalid_argument("index_accumulate_rows: target and values differ in dtype");
  if (row < 1 || target.size() % row != 0)
    throw std::invalid_argument("index_accumulate_rows: row must be positive and divide target's size");
  auto dt = target.dtype();
  if (dt.is(py::dtype::of<float>())) return index_accumulate_rows_typed<float>(target, index, values, row);
  if (dt.is(py::dtype::of<double>())) return index_accumulate_rows_typed<double>(target, index, values, row);
  if (dt.is(py::dtype::of<int64_t>())) return index_accumulate_rows_typed<int64_t>(target, index, values, row);
  if (dt.is(py::dtype::of<int32_t>())) return index_accumulate_rows_typed<int32_t>(target, index, values, row);
  if (dt.is(py::dtype::of<int16_t>())) return index_accumulate_rows_typed<int16_t>(target, index, values, row);
  if (dt.is(py::dtype::of<int8_t>())) return index_accumulate_rows_typed<int8_t>(target, index, values, row);
  if (dt.is(py::dtype::of<uint8_t>())) return index_accumulate_rows_typed<uint8_t>(target, index, values, row);
  if (dt.is(py::dtype::of<std::complex<float>>()))
    return index_accumulate_rows_typed<std::complex<float>>(target, index, values, row);
  if (dt.is(py::dtype::of<std::complex<double>>()))
    return index_accumulate_rows_typed<std::complex<double>>(target, index, values, row);
  throw std::invalid_argument("index_accumulate_rows: unsupported dtype");
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "ember's compiled kernels (C++17, OpenMP where useful)";
  m.def("get_num_threads", &get_num_threads, "Threads used by ember's OpenMP kernels.");
  m.def("set_num_threads", &set_num_threads, py::arg("n"), "Set the threads used by ember's OpenMP kernels.");
#ifdef EMBER_HAS_OPENMP
  m.attr("has_openmp") = true;
#else
  m.attr("has_openmp") = false;
#endif
  m.def("index_accumulate", &index_accumulate, py::arg("target"), py::arg("index"), py::arg("values"),
        "target[index[i]] += values[i] over flat contiguous arrays; repeated indices accumulate.");
  m.def("index_accumulate_rows", &index_accumulate_rows, py::arg("target"), py::arg("index"), py::arg("values"),
        py::arg("row"),
        "Rows of `row` elements: target[index[i]*row + k] += values[i*row + k] over C-contiguous arrays; repeated "
        "rows accumulate in the order of i.");
  init_conv(m);
  init_reduce(m);
  init_nn_kernels(m);
  init_optim(m);
  init_random(m);
  init_pointwise(m);
  init_engine(m);
  init_record(m);
  init_nn_backward(m);
  init_rnn(m);
  init_erf(m);
  init_nn_rows_backward(m);
  init_depthwise(m);
  init_blas_split(m);
  init_attention(m);
}
