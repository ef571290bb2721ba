// The inner loops of ember's CPU pointwise kernels (csrc/pointwise.cpp).
//
// This file is included twice by pointwise.cpp, inside two namespaces: once under
// `#pragma GCC target("avx2")` and once for the x86-64 baseline, so every loop below is
// compiled for both instruction sets (GCC vectorises them; -O3 is the Release default).
// It has no include guard on purpose and no includes of its own: pointwise.cpp includes
// what it needs before, and defines the shared types (Strided, the element types, the
// conversions and the operation functors) outside the two namespaces.

// One run of n elements: out[i] = op(a[i], b[i]) with byte strides. The common shapes of a
// run get their own loops: all contiguous, and one operand broadcast (stride 0: a scalar, or
// a column repeated along a row); anything else walks the strides.
template <typename Op, typename T, typename Out>
void binary_run(int64_t n, char* out, int64_t so, const char* a, int64_t sa, const char* b, int64_t sb,
                const Op& op) {
  using C = typename Compute<T>::type;
  constexpr int64_t sz = sizeof(T), szo = sizeof(Out);
  Out* o = reinterpret_cast<Out*>(out);
  const T* x = reinterpret_cast<const T*>(a);
  const T* y = reinterpret_cast<const T*>(b);
  if (so == szo && sa == sz && sb == sz) {
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i) o[i] = to_elem<Out>(op(to_compute(x[i]), to_compute(y[i])));
  } else if (so == szo && sa == sz && sb == 0) {
    const C s = to_compute(y[0]);
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i) o[i] = to_elem<Out>(op(to_compute(x[i]), s));
  } else if (so == szo && sa == 0 && sb == sz) {
    const C s = to_compute(x[0]);
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i) o[i] = to_elem<Out>(op(s, to_compute(y[i])));
  } else {
    for (int64_t i = 0; i < n; ++i) {
      *reinterpret_cast<Out*>(out + i * so) = to_elem<Out>(
          op(to_compute(*reinterpret_cast<const T*>(a + i * sa)), to_compute(*reinterpret_cast<const T*>(b + i * sb))));
    }
  }
}

// out[i] = op(a[i]) (unary ops and type conversions: From -> compute type -> To).
template <typename Op, typename From, typename To>
void unary_run(int64_t n, char* out, int64_t so, const char* a, int64_t sa, const Op& op) {
  To* o = reinterpret_cast<To*>(out);
  const From* x = reinterpret_cast<const From*>(a);
  if (so == int64_t(sizeof(To)) && sa == int64_t(sizeof(From))) {
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i) o[i] = convert<To>(op(to_compute(x[i])));
  } else if (so == int64_t(sizeof(To)) && sa == 0) {
    const To v = convert<To>(op(to_compute(x[0])));
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<To*>(out + i * so) = convert<To>(op(to_compute(*reinterpret_cast<const From*>(a + i * sa))));
  }
}

// out[i] = cond[i] ? a[i] : b[i] (a plain select: no arithmetic, so no compute type; T is an unsigned
// integer of the element's size). The contiguous loops select with a bit mask made from the condition
// byte, which GCC vectorises (a conditional load would keep them scalar).
template <typename T>
inline T select_bits(bool c, T a, T b) {
  const T mask = T(0) - T(c);  // all ones where c holds
  return (a & mask) | (b & ~mask);
}

template <typename T>
void where_run(int64_t n, char* out, int64_t so, const char* c, int64_t sc, const char* a, int64_t sa, const char* b,
               int64_t sb) {
  constexpr int64_t sz = sizeof(T);
  T* o = reinterpret_cast<T*>(out);
  const bool* m = reinterpret_cast<const bool*>(c);
  const T* x = reinterpret_cast<const T*>(a);
  const T* y = reinterpret_cast<const T*>(b);
  if (so == sz && sc == 1 && sa == sz && sb == sz) {
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i) o[i] = select_bits(m[i], x[i], y[i]);
  } else if (so == sz && sc == 1 && sa == sz && sb == 0) {
    const T s = y[0];
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i) o[i] = select_bits(m[i], x[i], s);
  } else if (so == sz && sc == 1 && sa == 0 && sb == sz) {
    const T s = x[0];
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i) o[i] = select_bits(m[i], s, y[i]);
  } else {
    // both values are loaded and selected by mask: a branch on a random condition mispredicts half
    // the time (a transposed `where(c, x.t(), y)` took 2.5x the time of `x.t() + y`)
    for (int64_t i = 0; i < n; ++i) {
      *reinterpret_cast<T*>(out + i * so) =
          select_bits(*reinterpret_cast<const bool*>(c + i * sc), *reinterpret_cast<const T*>(a + i * sa),
                      *reinterpret_cast<const T*>(b + i * sb));
    }
  }
}

// clamp: both bounds as numpy's clip (ClipOp), one bound as numpy's maximum or minimum.
template <typename T, bool HasLo, bool HasHi>
void clamp_run(int64_t n, char* out, int64_t so, const char* a, int64_t sa, const char* l, int64_t sl, const char* h,
               int64_t sh) {
  using C = typename Compute<T>::type;
  constexpr int64_t sz = sizeof(T);
  T* o = reinterpret_cast<T*>(out);
  const T* x = reinterpret_cast<const T*>(a);
  if (so == sz && sa == sz && sl == 0 && sh == 0) {  // bounds that are numbers: the common call
    const C lo = HasLo ? to_compute(*reinterpret_cast<const T*>(l)) : C();
    const C hi = HasHi ? to_compute(*reinterpret_cast<const T*>(h)) : C();
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i) {
      o[i] = to_elem<T>(clamp_one<C, HasLo, HasHi>(to_compute(x[i]), lo, hi));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const C lo = HasLo ? to_compute(*reinterpret_cast<const T*>(l + i * sl)) : C();
      const C hi = HasHi ? to_compute(*reinterpret_cast<const T*>(h + i * sh)) : C();
      *reinterpret_cast<T*>(out + i * so) =
          to_elem<T>(clamp_one<C, HasLo, HasHi>(to_compute(*reinterpret_cast<const T*>(a + i * sa)), lo, hi));
    }
  }
}

// ---- the loop over a whole Loop: rows of the innermost dim, split over threads -------------

// f(n, pointers, inner strides) over the flat elements [begin, end) of the loop's iteration space.
template <typename F>
void for_range(const Loop& L, int64_t begin, int64_t end, F& f) {
  const int nd = L.ndim;
  const int64_t inner = L.shape[nd - 1];
  int64_t idx[kMaxDims] = {};
  int64_t row = begin / inner, col = begin % inner;
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = row % L.shape[d];
    row /= L.shape[d];
  }
  char* ptr[kMaxOperands];
  int64_t inner_strides[kMaxOperands];
  for (int k = 0; k < L.nops; ++k) inner_strides[k] = L.strides[k][nd - 1];
  while (begin < end) {
    for (int k = 0; k < L.nops; ++k) {
      int64_t offset = col * L.strides[k][nd - 1];
      for (int d = 0; d < nd - 1; ++d) offset += idx[d] * L.strides[k][d];
      ptr[k] = L.data[k] + offset;
    }
    const int64_t n = std::min(inner - col, end - begin);
    f(n, ptr, inner_strides);
    begin += n;
    col = 0;
    for (int d = nd - 2; d >= 0; --d) {  // next row
      if (++idx[d] < L.shape[d]) break;
      idx[d] = 0;
    }
  }
}

// A 2-D loop in which an operand steps through memory along the columns by more than a cache line
// and along the rows by less (a transposed operand: `x.t() + y`) is walked in tiles of kTileRows x
// kTileCols elements. Row by row over the whole loop, each element of such an operand is on its own
// line (and a row of 1024 floats on its own pages), and the next row comes back to those lines
// after they have left L1. In a tile, kTileCols lines are in use at a time and each serves the
// tile's next rows while it is still in L1; few columns because the lines of a transposed operand
// are a power of two apart (4 KiB for 1024 floats) and so fall into the same L1 set, which holds 8.
// 1024x1024 float32 `x.t() + y` on one thread: ~9 ms -> ~1.5 ms (PyTorch, untiled: ~5-9 ms).
// Each element is computed as without tiles.
constexpr int64_t kTileRows = 128, kTileCols = 8;

bool wants_tiles(const Loop& L) {
  if (L.ndim != 2 || L.shape[0] < 16 || L.shape[1] < 2 * kTileCols) return false;  // (16 rows: a line's reuse)
  for (int k = 0; k < L.nops; ++k) {
    const int64_t along = std::abs(L.strides[k][1]), across = std::abs(L.strides[k][0]);
    if (along > 64 && across < along) return true;
  }
  return false;
}

// f over rows [row_begin, row_end) of a 2-D loop, in tiles (see wants_tiles).
template <typename F>
void for_tiles(const Loop& L, int64_t row_begin, int64_t row_end, F& f) {
  const int64_t cols = L.shape[1];
  char* ptr[kMaxOperands];
  int64_t inner_strides[kMaxOperands];
  for (int k = 0; k < L.nops; ++k) inner_strides[k] = L.strides[k][1];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kTileRows) {
    const int64_t r1 = std::min(r0 + kTileRows, row_end);
    for (int64_t c0 = 0; c0 < cols; c0 += kTileCols) {
      const int64_t n = std::min(kTileCols, cols - c0);
      for (int64_t r = r0; r < r1; ++r) {
        for (int k = 0; k < L.nops; ++k) ptr[k] = L.data[k] + r * L.strides[k][0] + c0 * L.strides[k][1];
        f(n, ptr, inner_strides);
      }
    }
  }
}

// Runs f over the loop, on several threads when there is enough work. Each element is computed
// the same way whichever thread takes it, so results don't depend on the thread count. (A tiled
// loop gives each thread a range of rows, the flat one a range of elements.)
template <typename F>
void run_loop(const Loop& L, F f) {
  const int64_t total = L.numel();
  if (total == 0) return;
  const int64_t threads = std::min<int64_t>(max_threads(), total / kParallelWork);
  const bool tiles = wants_tiles(L);
  if (threads <= 1) {
    if (tiles) for_tiles(L, 0, L.shape[0], f);
    else for_range(L, 0, total, f);
    return;
  }
#ifdef EMBER_HAS_OPENMP
#pragma omp parallel num_threads(static_cast<int>(threads))
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    F local = f;
    if (tiles) for_tiles(L, L.shape[0] * t / nt, L.shape[0] * (t + 1) / nt, local);
    else for_range(L, total * t / nt, total * (t + 1) / nt, local);
  }
#endif
}

// ---- entry points (one per kind of kernel), dispatching on op and dtype ------------------------

template <typename Op, typename T, typename Out>
void binary_loop(const Loop& L, const Op& op) {
  run_loop(L, [&op](int64_t n, char** p, const int64_t* s) {
    binary_run<Op, T, Out>(n, p[0], s[0], p[1], s[1], p[2], s[2], op);
  });
}

template <typename T>
void binary_typed(int op, const Loop& L, double alpha_f, int64_t alpha_i, bool has_alpha) {
  using C = typename Compute<T>::type;
  constexpr bool floating = std::is_floating_point_v<C>;
  const C alpha = floating ? C(alpha_f) : C(alpha_i);
  switch (op) {
    case kAdd:
      if (has_alpha) return binary_loop<AddAlphaOp<C>, T, T>(L, AddAlphaOp<C>{alpha});
      return binary_loop<AddOp, T, T>(L, AddOp());
    case kSub:
      if (has_alpha) return binary_loop<SubAlphaOp<C>, T, T>(L, SubAlphaOp<C>{alpha});
      return binary_loop<SubOp, T, T>(L, SubOp());
    case kMul: return binary_loop<MulOp, T, T>(L, MulOp());
    case kDiv:
      if constexpr (floating) return binary_loop<DivOp, T, T>(L, DivOp());
      break;
    case kMaximum: return binary_loop<MaxOp, T, T>(L, MaxOp());
    case kMinimum: return binary_loop<MinOp, T, T>(L, MinOp());
    case kEq: return binary_loop<EqOp, T, bool>(L, EqOp());
    case kNe: return binary_loop<NeOp, T, bool>(L, NeOp());
    case kLt: return binary_loop<LtOp, T, bool>(L, LtOp());
    case kLe: return binary_loop<LeOp, T, bool>(L, LeOp());
    case kGt: return binary_loop<GtOp, T, bool>(L, GtOp());
    case kGe: return binary_loop<GeOp, T, bool>(L, GeOp());
    default: break;
  }
  throw std::invalid_argument("pointwise_binary: op " + std::to_string(op) + " has no kernel for this dtype");
}

void binary(int op, int code, const Loop& L, double alpha_f, int64_t alpha_i, bool has_alpha) {
#define EMBER_PW_CASE(CODE, T) \
  case CODE: return binary_typed<T>(op, L, alpha_f, alpha_i, has_alpha);
  switch (code) { EMBER_PW_DTYPES(EMBER_PW_CASE) }
#undef EMBER_PW_CASE
  throw std::invalid_argument("pointwise_binary: unknown dtype code " + std::to_string(code));
}

template <typename Op, typename From, typename To>
void unary_loop(const Loop& L, const Op& op) {
  run_loop(L, [&op](int64_t n, char** p, const int64_t* s) { unary_run<Op, From, To>(n, p[0], s[0], p[1], s[1], op); });
}

template <typename T>
void unary_typed(int op, const Loop& L) {
  switch (op) {
    case kNeg: return unary_loop<NegOp, T, T>(L, NegOp());
    case kAbs: return unary_loop<AbsOp, T, T>(L, AbsOp());
    case kRelu: return unary_loop<ReluOp, T, T>(L, ReluOp());
    default: break;
  }
  if constexpr (std::is_floating_point_v<typename Compute<T>::type>) {
    switch (op) {
      case kExp: return unary_loop<ExpOp, T, T>(L, ExpOp());
      case kLog: return unary_loop<LogOp, T, T>(L, LogOp());
      case kTanh: return unary_loop<TanhOp, T, T>(L, TanhOp());
      case kSigmoid: return unary_loop<SigmoidOp, T, T>(L, SigmoidOp());
      case kSqrt: return unary_loop<SqrtOp, T, T>(L, SqrtOp());
      case kRsqrt: return unary_loop<RsqrtOp, T, T>(L, RsqrtOp());
      default: break;
    }
  }
  throw std::invalid_argument("pointwise_unary: unknown op " + std::to_string(op));
}

void unary(int op, int code, const Loop& L) {
#define EMBER_PW_CASE(CODE, T) \
  case CODE: return unary_typed<T>(op, L);
  switch (code) { EMBER_PW_DTYPES(EMBER_PW_CASE) }
#undef EMBER_PW_CASE
  throw std::invalid_argument("pointwise_unary: unknown dtype code " + std::to_string(code));
}

template <typename From>
void convert_from(int to, const Loop& L) {
#define EMBER_PW_CASE(CODE, T) \
  case CODE: return unary_loop<Identity, From, T>(L, Identity());
  switch (to) { EMBER_PW_DTYPES(EMBER_PW_CASE) }
#undef EMBER_PW_CASE
  throw std::invalid_argument("pointwise_convert: unknown dtype code " + std::to_string(to));
}

void convert(int to, int from, const Loop& L) {
#define EMBER_PW_CASE(CODE, T) \
  case CODE: return convert_from<T>(to, L);
  switch (from) { EMBER_PW_DTYPES(EMBER_PW_CASE) }
#undef EMBER_PW_CASE
  throw std::invalid_argument("pointwise_convert: unknown dtype code " + std::to_string(from));
}

template <typename T>
void where_loop(const Loop& L) {
  run_loop(L, [](int64_t n, char** p, const int64_t* s) { where_run<T>(n, p[0], s[0], p[1], s[1], p[2], s[2], p[3], s[3]); });
}

void where(int itemsize, const Loop& L) {
  switch (itemsize) {
    case 1: return where_loop<uint8_t>(L);
    case 2: return where_loop<uint16_t>(L);
    case 4: return where_loop<uint32_t>(L);
    case 8: return where_loop<uint64_t>(L);
    default: break;
  }
  throw std::invalid_argument("pointwise_where: unsupported item size " + std::to_string(itemsize));
}

template <typename T, bool HasLo, bool HasHi>
void clamp_loop(const Loop& L) {
  run_loop(L, [](int64_t n, char** p, const int64_t* s) {
    clamp_run<T, HasLo, HasHi>(n, p[0], s[0], p[1], s[1], p[2], s[2], p[3], s[3]);
  });
}

template <typename T>
void clamp_typed(bool lo, bool hi, const Loop& L) {
  if (lo && hi) return clamp_loop<T, true, true>(L);
  if (lo) return clamp_loop<T, true, false>(L);
  if (hi) return clamp_loop<T, false, true>(L);
  throw std::invalid_argument("pointwise_clamp: at least one bound is needed");
}

void clamp(int code, bool lo, bool hi, const Loop& L) {
#define EMBER_PW_CASE(CODE, T) \
  case CODE: return clamp_typed<T>(lo, hi, L);
  switch (code) { EMBER_PW_DTYPES(EMBER_PW_CASE) }
#undef EMBER_PW_CASE
  throw std::invalid_argument("pointwise_clamp: unknown dtype code " + std::to_string(code));
}
