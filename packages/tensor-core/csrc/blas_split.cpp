// Matrix products split over ember's OpenMP threads, each block one single-threaded call of numpy's BLAS.
//
// OpenBLAS's own threads busy-wait after each call and then fight ember's OpenMP kernels for the
// cores (see ember/_ops/_blas_threads.py), so ember keeps the BLAS on one thread and splits a product
// itself. Splitting on Python threads cost about 0.1 ms a product in hand-offs (a 256x128 @ 128x512
// product took 0.34 ms on two threads against 0.21 for PyTorch and 0.38 on one thread); here the
// blocks run on the OpenMP team the pointwise kernels use, without the GIL.
//
// The caller passes the address of numpy's cblas_sgemm/cblas_dgemm (LP64 or ILP64 integers) and
// row-major operands: A is m x k (or k x m when trans_a), B k x n (or n x k when trans_b), C m x n,
// each with its leading dimension in elements. C is cut into row blocks (or column blocks when it
// is wide and short); every element is computed by one call over the whole k, as without a split.
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#ifdef EMBER_HAS_OPENMP
#include <omp.h>
#endif

namespace py = pybind11;

namespace {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;  // CBLAS enums

template <typename T, typename I>
using Gemm = void (*)(int, int, int, I, I, I, T, const T*, I, const T*, I, T, T*, I);

struct Product {
  bool trans_a, trans_b;
  int64_t m, n, k, lda, ldb, ldc;
  uintptr_t a, b, c;
};

// One block of C: rows [r0, r1) and columns [c0, c1).
template <typename T, typename I>
void block(Gemm<T, I> gemm, const Product& p, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  if (r1 <= r0 || c1 <= c0) return;
  const T* a = reinterpret_cast<const T*>(p.a) + (p.trans_a ? r0 : r0 * p.lda);
  const T* b = reinterpret_cast<const T*>(p.b) + (p.trans_b ? c0 * p.ldb : c0);
  T* c = reinterpret_cast<T*>(p.c) + r0 * p.ldc + c0;
  gemm(kRowMajor, p.trans_a ? kTrans : kNoTrans, p.trans_b ? kTrans : kNoTrans, static_cast<I>(r1 - r0),
       static_cast<I>(c1 - c0), static_cast<I>(p.k), T(1), a, static_cast<I>(p.lda), b, static_cast<I>(p.ldb), T(0), c,
       static_cast<I>(p.ldc));
}

// The start of part i of `parts` over `extent`, on a multiple of `align` (the last part takes the rest).
int64_t cut(int64_t extent, int parts, int i, int64_t align) {
  if (i >= parts) return extent;
  int64_t at = extent * i / parts;
  return std::min(extent, (at + align - 1) / align * align);
}

template <typename T, typename I>
void run(uintptr_t fn, const Product& p, int threads) {
  auto gemm = reinterpret_cast<Gemm<T, I>>(fn);
  const bool by_rows = p.m >= 8 * threads || p.m >= p.n;
  const int64_t extent = by_rows ? p.m : p.n;
  const int64_t align = extent >= 16 * threads ? 16 : 1;  // whole register tiles of the BLAS's kernels
  py::gil_scoped_release release;
#ifdef EMBER_HAS_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static, 1)
#endif
  for (int i = 0; i < threads; ++i) {
    const int64_t lo = cut(extent, threads, i, align), hi = cut(extent, threads, i + 1, align);
    if (by_rows) block<T, I>(gemm, p, lo, hi, 0, p.n);
    else block<T, I>(gemm, p, 0, p.m, lo, hi);
  }
}

void split_gemm(uintptr_t fn, bool ilp64, bool is_double, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                uintptr_t a, int64_t lda, uintptr_t b, int64_t ldb, uintptr_t c, int64_t ldc, int threads) {
  if (fn == 0 || a == 0 || b == 0 || c == 0) throw std::invalid_argument("split_gemm: a null function or operand");
  if (m < 1 || n < 1 || k < 1 || threads < 1)
    throw std::invalid_argument("split_gemm: sizes and threads must be positive, got m=" + std::to_string(m) +
                                " n=" + std::to_string(n) + " k=" + std::to_string(k));
  // the leading dimensions BLAS requires (it would reject the call itself, through xerbla, which prints)
  if (lda < std::max<int64_t>(1, trans_a ? m : k) || ldb < std::max<int64_t>(1, trans_b ? k : n) || ldc < n)
    throw std::invalid_argument("split_gemm: a leading dimension is smaller than its rows");
  if (!ilp64 && std::max({m, n, k, lda, ldb, ldc}) > INT32_MAX)
    throw std::invalid_argument("split_gemm: sizes beyond 32-bit integers for an LP64 BLAS");
  Product p{trans_a, trans_b, m, n, k, lda, ldb, ldc, a, b, c};
  if (is_double) {
    if (ilp64) run<double, int64_t>(fn, p, threads);
    else run<double, int>(fn, p, threads);
  } else {
    if (ilp64) run<float, int64_t>(fn, p, threads);
    else run<float, int>(fn, p, threads);
  }
}

}  // namespace

void init_blas_split(py::module_& m) {
  m.def("split_gemm", &split_gemm, py::arg("fn"), py::arg("ilp64"), py::arg("is_double"), py::arg("trans_a"),
        py::arg("trans_b"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("a"), py::arg("lda"), py::arg("b"),
        py::arg("ldb"), py::arg("c"), py::arg("ldc"), py::arg("threads"),
        "C = op(A) @ op(B) (row-major, float32 or float64) as `threads` blocks of C on ember's OpenMP threads, each "
        "one call of the cblas gemm at address `fn` (numpy's BLAS, set to one thread by the caller).");
}
