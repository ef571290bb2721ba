// CPU scaled dot-product attention, forward and backward, for float32/float64 without a mask other than the
// causal one and without dropout (ember/_ops/nn_attention.py's kernel and ember-autograd's
// derivatives/nn_attention.py call it; other calls keep the numpy path).
//
// out = softmax(scale Q K^T) V is computed one block of kBlockRows query rows of one head at a time: the
// block's scores (one product through numpy's cblas gemm, whose address the caller passes, as for
// blas_split.cpp, with the BLAS set to one thread), the softmax of each row over the keys it sees
// (nn_rows_kernels.h's row kernel: all keys, or keys 0..i under the causal mask, the others exact zeros), and
// the block's output (a second product). The numpy path it replaces made about a dozen passes per call
// (a stacked product, a full-size causal mask written with copyto, the row softmax, another stacked product),
// each one costing more than its arithmetic on a small model's heads, and computed the masked half of causal
// scores only to overwrite it; a causal block here stops at the last key its last row sees.
//
// The backward recomputes each block's weights from Q and K (nothing of size (L, S) is kept between forward
// and backward, as with the formula it replaces): dV += W^T dO, dP = dO V^T, dS = W (dP - rowsum(dP W)),
// dQ = scale dS K, dK += scale dS^T Q, over the head's blocks in order.
//
// Threads: blocks (forward) or heads (backward: dK and dV sum over a head's blocks) are shared among ember's
// OpenMP threads from kParallelMacs multiply-adds. Block boundaries do not depend on the thread count, so
// neither do the results.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#ifdef EMBER_HAS_OPENMP
#include <omp.h>
#endif

namespace py = pybind11;

namespace attention_base {
#include "wide_math.h"
#include "nn_rows_kernels.h"
}  // namespace attention_base

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define EMBER_ATTENTION_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace attention_avx2 {
#include "wide_math.h"
#include "nn_rows_kernels.h"
}  // namespace attention_avx2
#pragma GCC pop_options
#endif

namespace {

constexpr int64_t kBlockRows = 64;            // query rows per block (a block's scores: kBlockRows x S)
// Multiply-adds from which the blocks go to several threads. Lower, a second thread did not pay: a causal
// (4, 4, 64, 32) forward (4M) took 200 us on two threads against 202 on one back to back, and 273 against 212
// after 200 us of Python (the sleeping worker's wake-up); (2, 4, 256, 32) (34M) took 731 against 1110.
constexpr int64_t kParallelMacs = int64_t(1) << 23;
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;  // CBLAS enums

template <typename T, typename I>
using Gemm = void (*)(int, int, int, I, I, I, T, const T*, I, const T*, I, T, T*, I);

bool use_avx2() {
#ifdef EMBER_ATTENTION_AVX2
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

template <typename T>
void softmax_row(const T* x, T* y, int64_t n) {
#ifdef EMBER_ATTENTION_AVX2
  if (use_avx2()) return attention_avx2::softmax_forward_row<T>(x, y, n, false);
#endif
  attention_base::softmax_forward_row<T>(x, y, n, false);
}

template <typename T>
void softmax_backward_row(const T* y, const T* g, T* out, int64_t n) {
#ifdef EMBER_ATTENTION_AVX2
  if (use_avx2()) return attention_avx2::softmax_backward_row<T>(y, g, out, n, false);
#endif
  attention_base::softmax_backward_row<T>(y, g, out, n, false);
}

// One operand: (*batch, rows, cols) with unit column stride; each head's matrix starts at head[h] (elements)
// and its rows are ld elements apart.
struct Operand {
  const char* data;
  int64_t rows, cols, ld;
  std::vector<int64_t> head;
};

Operand operand(const py::array& a, const std::vector<int64_t>& batch, const char* name) {
  const int nd = int(a.ndim());
  const int64_t size = int64_t(a.itemsize());
  if (nd != int(batch.size()) + 2) throw std::invalid_argument(std::string("attention: '") + name + "' has another batch shape");
  for (int d = 0; d < nd - 2; ++d)
    if (a.shape(d) != batch[size_t(d)])
      throw std::invalid_argument(std::string("attention: '") + name + "' has another batch shape");
  Operand op{static_cast<const char*>(a.data()), int64_t(a.shape(nd - 2)), int64_t(a.shape(nd - 1)), 0, {}};
  const int64_t s_row = int64_t(a.strides(nd - 2)), s_col = int64_t(a.strides(nd - 1));
  if ((s_col != size && op.cols > 1) || s_row % size != 0 || (op.rows > 1 && s_row / size < op.cols) || s_row < 0)
    throw std::invalid_argument(std::string("attention: '") + name + "' needs unit column stride and row stride >= its columns");
  op.ld = op.rows > 1 ? s_row / size : std::max<int64_t>(op.cols, 1);
  int64_t heads = 1;
  for (int64_t b : batch) heads *= b;
  op.head.assign(size_t(heads), 0);
  for (int64_t h = 0; h < heads; ++h) {  // unravel h over the batch dims
    int64_t rest = h, offset = 0;
    for (int d = nd - 3; d >= 0; --d) {
      const int64_t i = rest % batch[size_t(d)];
      rest /= batch[size_t(d)];
      if (a.strides(d) % size != 0) throw std::invalid_argument(std::string("attention: '") + name + "' has unaligned strides");
      offset += i * int64_t(a.strides(d)) / size;
    }
    op.head[size_t(h)] = offset;
  }
  return op;
}

std::vector<int64_t> batch_of(const py::array& q) {
  if (q.ndim() < 2) throw std::invalid_argument("attention: 'query' needs at least 2 dims");
  return std::vector<int64_t>(q.shape(), q.shape() + q.ndim() - 2);
}

py::array new_array(const py::array& like, const std::vector<int64_t>& batch, int64_t rows, int64_t cols) {
  std::vector<py::ssize_t> shape(batch.begin(), batch.end());
  shape.push_back(rows);
  shape.push_back(cols);
  return py::array(like.dtype(), shape);
}

// The keys row i of a block sees: all S, or 0..i under the causal mask (top-left aligned, as PyTorch's is_causal).
inline int64_t keys_seen(int64_t row, int64_t S, bool causal) { return causal ? std::min(row + 1, S) : S; }

template <typename T, typename I>
struct Heads {
  Gemm<T, I> gemm;
  Operand q, k, v;
  int64_t L, S, E, Ev;
  T scale;
  bool causal;

  const T* qp(int64_t h) const { return reinterpret_cast<const T*>(q.data) + q.head[size_t(h)]; }
  const T* kp(int64_t h) const { return reinterpret_cast<const T*>(k.data) + k.head[size_t(h)]; }
  const T* vp(int64_t h) const { return reinterpret_cast<const T*>(v.data) + v.head[size_t(h)]; }

  // C (m x n, ldc) = alpha op(A) op(B) + beta C
  void mm(bool ta, bool tb, int64_t m, int64_t n, int64_t kk, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) const {
    gemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, I(m), I(n), I(kk), alpha, a, I(lda), b, I(ldb),
         beta, c, I(ldc));
  }

  // The weights of rows [r0, r1) of head h into w (rows of `cols` entries; scratch: scores): returns cols,
  // the keys the block's last row sees.
  int64_t weights(int64_t h, int64_t r0, int64_t r1, T* scores, T* w) const {
    const int64_t rows = r1 - r0, cols = keys_seen(r1 - 1, S, causal);
    mm(false, true, rows, cols, E, scale, qp(h) + r0 * q.ld, q.ld, kp(h), k.ld, T(0), scores, cols);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = keys_seen(r0 + r, S, causal);
      softmax_row<T>(scores + r * cols, w + r * cols, n);
      std::fill(w + r * cols + n, w + (r + 1) * cols, T(0));
    }
    return cols;
  }

  void forward_block(int64_t h, int64_t r0, int64_t r1, T* scores, T* w, T* out) const {
    const int64_t cols = weights(h, r0, r1, scores, w);
    mm(false, false, r1 - r0, Ev, cols, T(1), w, cols, vp(h), v.ld, T(0), out + r0 * Ev, Ev);
  }

  // dq (L x E), dk (S x E), dv (S x Ev) of head h, contiguous; any may be null (not wanted).
  void backward_head(int64_t h, const T* g, int64_t ldg, T* scores, T* w, T* dp, T* dq, T* dk, T* dv) const {
    if (dk != nullptr) std::fill(dk, dk + S * E, T(0));
    if (dv != nullptr) std::fill(dv, dv + S * Ev, T(0));
    for (int64_t r0 = 0; r0 < L; r0 += kBlockRows) {
      const int64_t r1 = std::min(L, r0 + kBlockRows), rows = r1 - r0;
      const int64_t cols = weights(h, r0, r1, scores, w);
      const T* gb = g + r0 * ldg;
      if (dv != nullptr) mm(true, false, cols, Ev, rows, T(1), w, cols, gb, ldg, T(1), dv, Ev);
      if (dq == nullptr && dk == nullptr) continue;
      mm(false, true, rows, cols, Ev, T(1), gb, ldg, vp(h), v.ld, T(0), dp, cols);
      T* ds = scores;  // the scores are spent
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t n = keys_seen(r0 + r, S, causal);
        softmax_backward_row<T>(w + r * cols, dp + r * cols, ds + r * cols, n);
        std::fill(ds + r * cols + n, ds + (r + 1) * cols, T(0));
      }
      if (dq != nullptr) mm(false, false, rows, E, cols, scale, ds, cols, kp(h), k.ld, T(0), dq + r0 * E, E);
      if (dk != nullptr) mm(true, false, cols, E, rows, scale, ds, cols, qp(h) + r0 * q.ld, q.ld, T(1), dk, E);
    }
  }
};

int threads_for(int threads, int64_t macs, int64_t tasks) {
#ifdef EMBER_HAS_OPENMP
  if (macs < kParallelMacs) return 1;
  return int(std::max<int64_t>(1, std::min<int64_t>(threads, tasks)));
#else
  (void)macs;
  (void)tasks;
  (void)threads;
  return 1;
#endif
}

template <typename T, typename I>
Heads<T, I> heads_of(uintptr_t fn, const py::array& q, const py::array& k, const py::array& v, double scale,
                     bool causal) {
  const std::vector<int64_t> batch = batch_of(q);
  Heads<T, I> p{reinterpret_cast<Gemm<T, I>>(fn), operand(q, batch, "query"), operand(k, batch, "key"),
                operand(v, batch, "value"), 0, 0, 0, 0, T(scale), causal};
  p.L = p.q.rows;
  p.S = p.k.rows;
  p.E = p.q.cols;
  p.Ev = p.v.cols;
  if (p.k.cols != p.E || p.v.rows != p.S)
    throw std::invalid_argument("attention: key must be (*, S, E) and value (*, S, Ev) for a query (*, L, E)");
  if (p.L < 1 || p.S < 1 || p.E < 1 || p.Ev < 1) throw std::invalid_argument("attention: empty dims are not taken");
  return p;
}

template <typename T, typename I>
py::array forward_typed(uintptr_t fn, const py::array& q, const py::array& k, const py::array& v, double scale,
                        bool causal, int threads) {
  const Heads<T, I> p = heads_of<T, I>(fn, q, k, v, scale, causal);
  const int64_t heads = int64_t(p.q.head.size()), blocks = (p.L + kBlockRows - 1) / kBlockRows;
  py::array out = new_array(q, batch_of(q), p.L, p.Ev);
  T* o = static_cast<T*>(out.mutable_data());
  const int64_t scratch = std::min(kBlockRows, p.L) * p.S;
  const int team = threads_for(threads, heads * p.L * p.S * (p.E + p.Ev), heads * blocks);
  py::gil_scoped_release release;
#ifdef EMBER_HAS_OPENMP
#pragma omp parallel num_threads(team) if (team > 1)
#endif
  {
    std::vector<T> buffer(size_t(2 * scratch));
#ifdef EMBER_HAS_OPENMP
#pragma omp for schedule(static)
#endif
    for (int64_t task = 0; task < heads * blocks; ++task) {
      const int64_t h = task / blocks, r0 = (task % blocks) * kBlockRows;
      p.forward_block(h, r0, std::min(p.L, r0 + kBlockRows), buffer.data(), buffer.data() + scratch,
                      o + h * p.L * p.Ev);
    }
  }
  return out;
}

template <typename T, typename I>
py::tuple backward_typed(uintptr_t fn, const py::array& g, const py::array& q, const py::array& k,
                         const py::array& v, double scale, bool causal, bool want_dq, bool want_dk, bool want_dv,
                         int threads) {
  const Heads<T, I> p = heads_of<T, I>(fn, q, k, v, scale, causal);
  const std::vector<int64_t> batch = batch_of(q);
  const Operand go = operand(g, batch, "grad");
  if (go.rows != p.L || go.cols != p.Ev) throw std::invalid_argument("attention: 'grad' must be the output's shape");
  const int64_t heads = int64_t(p.q.head.size());
  py::object dq_out = py::none(), dk_out = py::none(), dv_out = py::none();
  py::array dq, dk, dv;
  if (want_dq) dq_out = dq = new_array(q, batch, p.L, p.E);
  if (want_dk) dk_out = dk = new_array(q, batch, p.S, p.E);
  if (want_dv) dv_out = dv = new_array(q, batch, p.S, p.Ev);
  T* dqp = want_dq ? static_cast<T*>(dq.mutable_data()) : nullptr;
  T* dkp = want_dk ? static_cast<T*>(dk.mutable_data()) : nullptr;
  T* dvp = want_dv ? static_cast<T*>(dv.mutable_data()) : nullptr;
  const int64_t scratch = std::min(kBlockRows, p.L) * p.S;
  const int team = threads_for(threads, 2 * heads * p.L * p.S * (p.E + p.Ev), heads);
  {
    py::gil_scoped_release release;
#ifdef EMBER_HAS_OPENMP
#pragma omp parallel num_threads(team) if (team > 1)
#endif
    {
      std::vector<T> buffer(size_t(3 * scratch));
#ifdef EMBER_HAS_OPENMP
#pragma omp for schedule(static)
#endif
      for (int64_t h = 0; h < heads; ++h) {
        const T* gh = reinterpret_cast<const T*>(go.data) + go.head[size_t(h)];
        p.backward_head(h, gh, go.ld, buffer.data(), buffer.data() + scratch, buffer.data() + 2 * scratch,
                        dqp == nullptr ? nullptr : dqp + h * p.L * p.E, dkp == nullptr ? nullptr : dkp + h * p.S * p.E,
                        dvp == nullptr ? nullptr : dvp + h * p.S * p.Ev);
      }
    }
  }
  return py::make_tuple(dq_out, dk_out, dv_out);
}

void check_dtypes(const char* fn, const py::array& first, std::initializer_list<const py::array*> rest) {
  for (const py::array* a : rest)
    if (!a->dtype().is(first.dtype())) throw std::invalid_argument(std::string(fn) + ": the arrays differ in dtype");
  if (!first.dtype().is(py::dtype::of<float>()) && !first.dtype().is(py::dtype::of<double>()))
    throw std::invalid_argument(std::string(fn) + ": float32 or float64 arrays only");
}

void check_fn(const char* name, uintptr_t fn, int threads) {
  if (fn == 0) throw std::invalid_argument(std::string(name) + ": a null gemm address");
  if (threads < 1) throw std::invalid_argument(std::string(name) + ": threads must be positive, got " + std::to_string(threads));
}

py::array attention_forward(uintptr_t fn, bool ilp64, py::array q, py::array k, py::array v, double scale, bool causal,
                            int threads) {
  check_fn("attention_forward", fn, threads);
  check_dtypes("attention_forward", q, {&k, &v});
  const bool dbl = q.dtype().is(py::dtype::of<double>());
  if (dbl) return ilp64 ? forward_typed<double, int64_t>(fn, q, k, v, scale, causal, threads)
                        : forward_typed<double, int>(fn, q, k, v, scale, causal, threads);
  return ilp64 ? forward_typed<float, int64_t>(fn, q, k, v, scale, causal, threads)
               : forward_typed<float, int>(fn, q, k, v, scale, causal, threads);
}

py::tuple attention_backward(uintptr_t fn, bool ilp64, py::array g, py::array q, py::array k, py::array v,
                             double scale, bool causal, bool want_dq, bool want_dk, bool want_dv, int threads) {
  check_fn("attention_backward", fn, threads);
  check_dtypes("attention_backward", q, {&k, &v, &g});
  const bool dbl = q.dtype().is(py::dtype::of<double>());
  if (dbl) return ilp64 ? backward_typed<double, int64_t>(fn, g, q, k, v, scale, causal, want_dq, want_dk, want_dv, threads)
                        : backward_typed<double, int>(fn, g, q, k, v, scale, causal, want_dq, want_dk, want_dv, threads);
  return ilp64 ? backward_typed<float, int64_t>(fn, g, q, k, v, scale, causal, want_dq, want_dk, want_dv, threads)
               : backward_typed<float, int>(fn, g, q, k, v, scale, causal, want_dq, want_dk, want_dv, threads);
}

}  // namespace

void init_attention(py::module_& m) {
  m.def("attention_forward", &attention_forward, py::arg("fn"), py::arg("ilp64"), py::arg("query"), py::arg("key"),
        py::arg("value"), py::arg("scale"), py::arg("causal"), py::arg("threads"),
        "softmax(scale query key^T) value (causal: query row i sees keys 0..i) of float32/float64 arrays "
        "(*, L, E), (*, S, E), (*, S, Ev) with unit column strides, through the cblas gemm at address `fn` (numpy's "
        "BLAS, set to one thread by the caller); a new C-contiguous (*, L, Ev) array.");
  m.def("attention_backward", &attention_backward, py::arg("fn"), py::arg("ilp64"), py::arg("grad"),
        py::arg("query"), py::arg("key"), py::arg("value"), py::arg("scale"), py::arg("causal"), py::arg("want_dq"),
        py::arg("want_dk"), py::arg("want_dv"), py::arg("threads"),
        "The gradients (d_query, d_key, d_value; None where not wanted) of attention_forward's output for its "
        "gradient `grad` (*, L, Ev): new C-contiguous arrays.");
}
