// Fused optimizer steps: Adam / AdamW (with AMSGrad) in one pass over each parameter.
//
// ember.optim's Adam runs about ten numpy passes over every parameter per step (lerp, square,
// sqrt, add, divide, multiply, add ...), each reading and writing whole arrays on one thread.
// Here each element is read once, updated in registers and written once, in vector instructions
// (AVX-512 or AVX2 where the CPU has them). Very large arrays (min_parallel, 2**22 elements by
// default) are split over ember's OpenMP threads (the count set by ember.set_num_threads). Not
// smaller ones: the step comes right after the backward pass, whose large matrix products leave
// OpenBLAS's worker threads busy-waiting on the cores; a parallel region then waits for a core
// (a scheduler time slice) at its barrier. On two cores the MLP benchmark's training step took
// 16 ms with the step split from 2**15 elements and 5-6.6 ms with it on one thread (2026-11-30).
//
// Numerics: the same float operations, in the same order and in the parameter's dtype, as the
// single-tensor path of ember/optim/adam.py (which is PyTorch's Adam with the bias correction
// folded into two scalars); the scalars are computed in double as Python computes them. This
// file is compiled with -ffp-contract=off (CMakeLists.txt) so that no multiply-add is fused,
// which keeps the results the single-tensor path's bits.
//
// The Python caller (ember/optim/adam.py, _fused_adam) checks dtypes, shapes and contiguity
// first; these functions check again only what protects memory.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef EMBER_HAS_OPENMP
#include <omp.h>
#endif

namespace py = pybind11;

namespace {

int max_threads() {
#ifdef EMBER_HAS_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// How weight decay enters the step.
enum Decay { kNoDecay, kL2, kDecoupled };

// The per-parameter constants of one step, in the parameter's dtype T.
template <typename T>
struct Constants {
  T sign;             // -1 with maximize (g * -1 is -g exactly), else 1
  T decay;            // kDecoupled: the factor 1 - lr * weight_decay; kL2: weight_decay
  bool small1, small2;  // whether lerp's weight (1 - beta) is below 0.5: which of its two formulas
  T c1, c2;           // lerp's factor: the weight, or -(1 - weight) for the other formula
  T eps_term;         // eps * sqrt(1 - beta2**t)
  T neg_step_size;    // -lr * sqrt(1 - beta2**t) / (1 - beta1**t)
};

// ember's lerp_ with a number weight has two formulas, each exact at its end point:
// out + (end - out) * w for |w| < 0.5, else end - (end - out) * (1 - w). The second is written
// end + (end - out) * -(1 - w), the same bits, so both are base + diff * c and vectorize as one.
template <typename T>
__attribute__((always_inline)) inline T lerp(T out, T end, bool small, T c) {
  const T diff = end - out;
  return diff * c + (small ? out : end);
}

// The element loop over [i0, i1), inlined into one function per instruction set below. The
// operations and their order are the single-tensor path's (ember/optim/adam.py), element by element.
template <typename T, Decay D, bool AMSGRAD>
__attribute__((always_inline)) inline void adam_range(T* __restrict param, const T* __restrict grad,
                                                       T* __restrict exp_avg, T* __restrict exp_avg_sq,
                                                       T* __restrict max_exp_avg_sq, int64_t i0, int64_t i1,
                                                       const Constants<T>& k) {
  for (int64_t i = i0; i < i1; ++i) {
    T g = grad[i] * k.sign;
    T p = param[i];
    if (D == kDecoupled) p = p * k.decay;
    if (D == kL2) g = g + p * k.decay;
    const T m = lerp(exp_avg[i], g, k.small1, k.c1);
    const T v = lerp(exp_avg_sq[i], g * g, k.small2, k.c2);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    T v_used = v;
    if (AMSGRAD) {
      const T old = max_exp_avg_sq[i];
      v_used = (old > v || old != old) ? old : v;  // numpy's maximum: NaN wins
      max_exp_avg_sq[i] = v_used;
    }
    const T denom = std::sqrt(v_used) + k.eps_term;
    param[i] = p + k.neg_step_size * (m / denom);
  }
}

// One function per (dtype, decay, amsgrad) and instruction set; ISA picks the vector width.
#define EMBER_OPTIM_VARIANT(NAME, TARGET)                                                                  \
  template <typename T, Decay D, bool AMSGRAD>                                                             \
  TARGET void NAME(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq, int64_t i0,      \
                   int64_t i1, const Constants<T>& k) {                                                    \
    adam_range<T, D, AMSGRAD>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, i0, i1, k);                \
  }
EMBER_OPTIM_VARIANT(adam_baseline, )
EMBER_OPTIM_VARIANT(adam_avx2, __attribute__((target("avx2"))))
EMBER_OPTIM_VARIANT(adam_avx512, __attribute__((target("avx512f,avx512vl,prefer-vector-width=512"))))
#undef EMBER_OPTIM_VARIANT

enum Isa { kBaseline, kAvx2, kAvx512 };

Isa best_isa() {
  static const Isa isa = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") ? kAvx512
                         : __builtin_cpu_supports("avx2")                                         ? kAvx2
                                                                                                  : kBaseline;
  return isa;
}

template <typename T, Decay D, bool AMSGRAD>
void adam_dispatch(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq, int64_t n,
                   const Constants<T>& k, int64_t min_parallel) {
  auto range = best_isa() == kAvx512 ? &adam_avx512<T, D, AMSGRAD>
               : best_isa() == kAvx2 ? &adam_avx2<T, D, AMSGRAD>
                                     : &adam_baseline<T, D, AMSGRAD>;
  const bool parallel = n >= min_parallel && max_threads() > 1;
  if (!parallel) return range(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, 0, n, k);
#ifdef EMBER_HAS_OPENMP
#pragma omp parallel
  {
    // contiguous chunks, cut at multiples of 16 elements (whole vectors, separate cache lines)
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t blocks = (n + 15) / 16;
    const int64_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
    const int64_t i0 = b0 * 16, i1 = b1 * 16 < n ? b1 * 16 : n;
    if (i0 < i1) range(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, i0, i1, k);
  }
#endif
}

struct AdamArgs {
  double lr, beta1, beta2, weight_decay, eps;
  bool amsgrad, maximize, adamw;
  int64_t min_parallel;  // elements from which a parameter is split over the threads
};

template <typename T>
void adam_one(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq, int64_t n, const AdamArgs& a,
              double step) {
  const int64_t mp = a.min_parallel;
  // Python's float arithmetic (its ** is C's pow): the bits of ember/optim/adam.py's _step_scalars.
  const double bias_correction1 = 1 - std::pow(a.beta1, step);
  const double bias_correction2_sqrt = std::pow(1 - std::pow(a.beta2, step), 0.5);
  const double w1 = 1 - a.beta1, w2 = 1 - a.beta2;
  Constants<T> k;
  k.sign = a.maximize ? T(-1) : T(1);
  k.decay = static_cast<T>(a.adamw ? 1 - a.lr * a.weight_decay : a.weight_decay);
  k.small1 = std::abs(w1) < 0.5;
  k.small2 = std::abs(w2) < 0.5;
  k.c1 = k.small1 ? static_cast<T>(w1) : -static_cast<T>(1 - w1);
  k.c2 = k.small2 ? static_cast<T>(w2) : -static_cast<T>(1 - w2);
  k.eps_term = static_cast<T>(a.eps * bias_correction2_sqrt);
  k.neg_step_size = static_cast<T>(-(a.lr / bias_correction1 * bias_correction2_sqrt));
  const Decay d = a.weight_decay == 0 ? kNoDecay : a.adamw ? kDecoupled : kL2;
  if (a.amsgrad) {
    if (d == kNoDecay) return adam_dispatch<T, kNoDecay, true>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, k, mp);
    if (d == kL2) return adam_dispatch<T, kL2, true>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, k, mp);
    return adam_dispatch<T, kDecoupled, true>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, k, mp);
  }
  if (d == kNoDecay) return adam_dispatch<T, kNoDecay, false>(param, grad, exp_avg, exp_avg_sq, nullptr, n, k, mp);
  if (d == kL2) return adam_dispatch<T, kL2, false>(param, grad, exp_avg, exp_avg_sq, nullptr, n, k, mp);
  return adam_dispatch<T, kDecoupled, false>(param, grad, exp_avg, exp_avg_sq, nullptr, n, k, mp);
}

// The writable C-contiguous array of `a`, of dtype T and n elements, or an error naming `what`.
template <typename T>
T* checked(py::array a, const char* what, int64_t n, bool writable) {
  if (!a.dtype().is(py::dtype::of<T>())) throw std::invalid_argument(std::string("fused_adam_: ") + what + " differs in dtype from param");
  if (!(a.flags() & py::array::c_style)) throw std::invalid_argument(std::string("fused_adam_: ") + what + " must be C-contiguous");
  if (a.size() != n) throw std::invalid_argument(std::string("fused_adam_: ") + what + " differs in size from param");
  if (writable && !a.writeable()) throw std::invalid_argument(std::string("fused_adam_: ") + what + " must be writable");
  return static_cast<T*>(a.mutable_data());
}

template <typename T>
void adam_typed(py::array param, py::array grad, py::array exp_avg, py::array exp_avg_sq, py::object max_exp_avg_sq,
                const AdamArgs& s, double step) {
  const int64_t n = param.size();
  T* p = checked<T>(param, "param", n, true);
  const T* g = checked<T>(grad, "grad", n, false);
  T* m = checked<T>(exp_avg, "exp_avg", n, true);
  T* v = checked<T>(exp_avg_sq, "exp_avg_sq", n, true);
  T* vmax = nullptr;
  if (s.amsgrad) {
    if (max_exp_avg_sq.is_none()) throw std::invalid_argument("fused_adam_: amsgrad needs max_exp_avg_sq arrays");
    vmax = checked<T>(max_exp_avg_sq.cast<py::array>(), "max_exp_avg_sq", n, true);
  }
  py::gil_scoped_release release;
  adam_one<T>(p, g, m, v, vmax, n, s, step);
}

// One Adam/AdamW step over lists of parameters (numpy arrays, updated in place).
void fused_adam_(py::list params, py::list grads, py::list exp_avgs, py::list exp_avg_sqs, py::list max_exp_avg_sqs,
                 std::vector<double> steps, double lr, double beta1, double beta2, double weight_decay, double eps,
                 bool amsgrad, bool maximize, bool adamw, int64_t min_parallel) {
  const size_t count = params.size();
  if (grads.size() != count || exp_avgs.size() != count || exp_avg_sqs.size() != count || steps.size() != count ||
      (amsgrad && max_exp_avg_sqs.size() != count))
    throw std::invalid_argument("fused_adam_: the lists differ in length");
  const AdamArgs s{lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, adamw, min_parallel};
  for (size_t i = 0; i < count; ++i) {
    py::array param = params[i].cast<py::array>();
    py::object vmax = amsgrad ? py::object(max_exp_avg_sqs[i]) : py::object(py::none());
    auto dt = param.dtype();
    if (dt.is(py::dtype::of<float>()))
      adam_typed<float>(param, grads[i].cast<py::array>(), exp_avgs[i].cast<py::array>(),
                        exp_avg_sqs[i].cast<py::array>(), vmax, s, steps[i]);
    else if (dt.is(py::dtype::of<double>()))
      adam_typed<double>(param, grads[i].cast<py::array>(), exp_avgs[i].cast<py::array>(),
                         exp_avg_sqs[i].cast<py::array>(), vmax, s, steps[i]);
    else
      throw std::invalid_argument("fused_adam_: param must be float32 or float64");
  }
}

}  // namespace

void init_optim(py::module_& m) {
  m.def("fused_adam_", &fused_adam_, py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"),
        py::arg("max_exp_avg_sqs"), py::arg("steps"), py::arg("lr"), py::arg("beta1"), py::arg("beta2"),
        py::arg("weight_decay"), py::arg("eps"), py::arg("amsgrad"), py::arg("maximize"), py::arg("adamw"),
        py::arg("min_parallel") = int64_t(1) << 22,
        "One Adam step (adamw=True: AdamW's decoupled decay) over lists of C-contiguous float32/float64 arrays, in "
        "place; steps[i] is parameter i's step count after this step (from 1). max_exp_avg_sqs is used with "
        "amsgrad. Parameters of at least min_parallel elements are split over ember's threads.");
}
