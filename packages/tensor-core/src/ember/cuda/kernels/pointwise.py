"""Fast CUDA kernels of the common pointwise ops, for contiguous float tensors (float32, float64, float16, bfloat16).

The generic CUDA path runs an op's CPU kernel on CuPy arrays, one CuPy
elementwise kernel per numpy call: correct, but CuPy's elementwise kernels load
one element per thread through an indexer (about 2.5 TB/s on an H200 against
4.3 TB/s for a device copy), and a composed op (``sigmoid``, ``gelu``) makes one
pass over memory per step. The kernels here are generated CUDA C (compiled once
per op and dtype by NVRTC, through ``cupy.RawModule``) that

* load and store 16 bytes per access (``float4``-sized packs, two packs in flight
  per thread), with a one-element-per-thread variant for misaligned pointers;
* fuse a composed op into one pass, computing the same float operations in the
  same order as the generic path, each rounded to the dtype (NVRTC's
  ``--fmad=false`` keeps ``a * b + c`` from contracting into one rounding), so
  float32 results are bit-identical to the generic path's;
* compute float16/bfloat16 in float32 registers (loaded as 16-bit words, :mod:`.halves`) and round the op's
  result once to nearest even, as PyTorch's kernels do. This is the one place where the fast kernels differ
  from the generic path (CuPy's 16-bit loops, or the float32 detour of :mod:`ember.cuda._bf16`): a composite
  op (``gelu``, ``sigmoid``, ``silu``) there rounds each step to the 16-bit dtype, here only the result, so
  its last bit may differ (closer to the exact value). Single operations (``add``, ``exp``) agree.

They take the common call only: tensors of one float dtype, one shape, C-contiguous,
on the current GPU (and, for ``add``/``sub``/``mul``/``div``, a float tensor with
a Python number). Anything else (broadcasting, strides, other dtypes, keyword
arguments) returns None from the fast function and runs the generic path.

Two entry points per op, installed by :func:`register`:

* the op's checked ``cuda`` kernel (``op.register_checked_kernel("cuda", fast)``):
  ``fast(*args) -> cupy array or None``, which the dispatcher calls for calls without
  keywords before the meta function (the fast function does the meta function's
  checks for the calls it takes);
* the op's ``cuda`` kernel: the same fast function, else the op's generic path
  (its CPU kernel on CuPy arrays, or a composite op's decomposition).
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np

from ..._tensor import Tensor
from .._runtime import cupy_module
from .halves import SOURCES as _HALF_SOURCES

__all__ = ["register", "generic_only", "FAST_OPS", "fast_function", "gelu_backward", "convert", "compiled", "THREADS",
           "UNROLL"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_F16 = np.dtype(np.float16)
_BF16 = None  # ml_dtypes' bfloat16 (register() reads it from ember.cuda._bf16: import ember leaves ml_dtypes out)
_BOOL = np.dtype(np.bool_)
#: dtype -> its type in the CUDA source (register() adds bfloat16); the 16-bit types are :mod:`.halves`' structs
_CTYPE = {_F32: "float", _F64: "double", _BOOL: "bool", _F16: "f16"}


def _is_half(dtype):
    """Whether ``dtype`` is float16 or bfloat16 (stored in 16 bits, computed in float32)."""
    return dtype is _F16 or dtype is _BF16


def _is_float(dtype):
    """Whether the fast kernels take arrays of ``dtype``: float32, float64, float16, bfloat16."""
    return dtype is _F32 or dtype is _F64 or _is_half(dtype)


def _compute(dtype):
    """The dtype the kernels compute ``dtype`` values in: float32 for float16/bfloat16, else ``dtype``."""
    return _F32 if _is_half(dtype) else dtype

#: Threads per block and packs per thread of the vectorised kernels (a tuning knob: clear
#: :data:`compiled` after changing them).
THREADS = 256
UNROLL = 2

#: (kernel name, dtype, layout) -> (vectorised function, one-element function, vector width, alignment in bytes)
compiled = {}
_installed = {}  # op -> the cuda kernel it had before register() (None: none)

_cp = None  # cupy, once register() ran
_ndarray = None  # cupy.ndarray
_get_device = None  # cupy.cuda.runtime.getDevice


# --------------------------------------------------------------------------- CUDA source


def _literal(value, dtype):
    """A CUDA C expression with exactly the bits of ``value`` rounded to ``dtype``."""
    if dtype == _F32:
        bits = int(np.float32(value).view(np.uint32))
        return f"__int_as_float(0x{bits:08x})"
    bits = int(np.float64(value).view(np.uint64))
    return f"__longlong_as_double(0x{bits:016x}LL)"


def _math(name, dtype):
    """The CUDA math function of ``name`` (``exp``) for ``dtype``: ``expf`` for float32."""
    return f"{name}f" if dtype == _F32 else name


_SQRT_HALF = 0.5**0.5
_INV_SQRT_2PI = 1.0 / (2.0 * np.pi) ** 0.5
_SQRT_2_OVER_PI = (2.0 / np.pi) ** 0.5
_GELU_KAPPA = 0.044715


def _expression(kind, dtype):
    """The C expression of ``kind`` over ``in0``, ``in1``, ``in2`` (each in ``dtype`` unless bool).

    Each follows the generic path's sequence of float operations (see the module docstring):
    ``sigmoid`` is ``reciprocal(exp(-x) + 1)`` as ember's CPU kernel computes it, ``gelu`` and
    ``silu`` the decompositions of those composite ops.
    """
    one, zero, half = _literal(1.0, dtype), _literal(0.0, dtype), _literal(0.5, dtype)
    exp, tanh, erf = _math("exp", dtype), _math("tanh", dtype), _math("erf", dtype)
    sigmoid = f"({one} / ({exp}(-in0) + {one}))"
    table = {
        "add": "in0 + in1",
        "sub": "in0 - in1",
        "add_alpha": "in0 + in1 * in2",  # the generic kernel scales other by alpha first, then adds
        "sub_alpha": "in0 - in1 * in2",
        "mul": "in0 * in1",
        "div": "in0 / in1",
        "gt": "in0 > in1",
        "ge": "in0 >= in1",
        "lt": "in0 < in1",
        "le": "in0 <= in1",
        "mul_mask": f"in0 * (in1 ? {one} : {zero})",  # float * bool: the bool converted to the float dtype
        "mask_mul": f"(in0 ? {one} : {zero}) * in1",
        "where": "in0 ? in1 : in2",
        "neg": "-in0",
        "exp": f"{exp}(in0)",
        "tanh": f"{tanh}(in0)",
        "sigmoid": sigmoid,
        # CuPy's maximum(x, 0), which relu's decomposition (clamp(min=0)) runs: its NaN, else fmax
        "relu": f"(in0 != in0 ? ({_CTYPE[dtype]})__int_as_float(0x7fffffff) : {_math('fmax', dtype)}(in0, {zero}))",
        "silu": f"in0 * {sigmoid}",
        "gelu": f"(in0 * {half}) * ({erf}(in0 * {_literal(_SQRT_HALF, dtype)}) + {one})",
        "gelu_tanh": (
            f"(in0 * {half}) * ({tanh}((in0 + ((in0 * in0) * in0) * {_literal(_GELU_KAPPA, dtype)})"
            f" * {_literal(_SQRT_2_OVER_PI, dtype)}) + {one})"
        ),
        "tanh_backward": "in0 * (" + one + " - in1 * in1)",
        # gelu's gradient (in0: grad, in1: input) as ember-autograd's formula computes it, op by op:
        # grad * (cdf + x * pdf), cdf = erf(x * sqrt(1/2)) * 0.5 + 0.5, pdf = exp(x * x * -0.5) / sqrt(2 pi)
        "gelu_backward": (
            f"in0 * ((({erf}(in1 * {_literal(_SQRT_HALF, dtype)}) * {half}) + {half})"
            f" + in1 * ({exp}((in1 * in1) * {_literal(-0.5, dtype)}) * {_literal(_INV_SQRT_2PI, dtype)}))"
        ),
        # and its tanh form: grad * ((t + 1) * 0.5 + x * 0.5 * (1 - t * t) * ((x * x * 3 kappa + 1) * c)),
        # t = tanh((x + x * x * x * kappa) * c), c = sqrt(2 / pi)
        "gelu_tanh_backward": (
            f"in0 * ((({_gelu_tanh_t(dtype)} + {one}) * {half}) + (((in1 * {half}) * ({one} - "
            f"{_gelu_tanh_t(dtype)} * {_gelu_tanh_t(dtype)})) * ((((in1 * in1) * {_literal(3 * _GELU_KAPPA, dtype)})"
            f" + {one}) * {_literal(_SQRT_2_OVER_PI, dtype)})))"
        ),
        "threshold_backward": f"(in1 <= in2 ? {zero} : in0)",  # a NaN in1 passes in0, as on the CPU
        "sigmoid_backward": "in0 * (in1 - in1 * in1)",
        "copy": "in0",
        # a conversion (the output's dtype in the name, so each has its own compiled kernel): the store rounds
        "to_float32": "in0",
        "to_float16": "in0",
        "to_bfloat16": "in0",
    }
    return table[kind]


def _gelu_tanh_t(dtype):
    """``tanh((x + x * x * x * kappa) * sqrt(2 / pi))`` of ``in1``, as the tanh-gelu gradient's formula rounds it."""
    return (f"{_math('tanh', dtype)}(((in1 + ((in1 * in1) * in1) * {_literal(_GELU_KAPPA, dtype)}))"
            f" * {_literal(_SQRT_2_OVER_PI, dtype)})")


_PACK = """
template <typename T, int N> struct __align__(sizeof(T) * N) ember_pack { T v[N]; };
"""


def _load(ctype, value):
    """C expression of ``value`` (stored as ``ctype``) in its compute type: 16-bit floats widen to float."""
    return f"to_acc({value})" if ctype in _HALF_SOURCES else value


def _store(ctype, slot, expr):
    """C statement storing ``expr`` in ``slot`` of type ``ctype``: 16-bit floats are rounded to nearest even."""
    return f"put(&{slot}, ({expr}));" if ctype in _HALF_SOURCES else f"{slot} = ({expr});"


def _source(name, expr, inputs, out_ctype, width):
    """CUDA C of ``name_v`` (``width`` elements per pack) and ``name_s`` (one per thread).

    ``inputs``: per operand, ``(ctype, compute ctype, kind)``, the compute ctype being the type the expression
    sees (``float`` for the 16-bit types); ``kind`` ``"a"`` an array read at the output's index (``p{i}``),
    ``"b"`` an array of ``m`` elements repeated along the output (read at the index modulo ``m``: an operand
    broadcast over leading dims; the vectorised kernel then needs ``m`` to be a multiple of ``width``),
    ``"s"`` a scalar value (``s{i}``); the expression reads ``in{i}``.
    """
    params = []
    for i, (ctype, compute, kind) in enumerate(inputs):
        params.append(f"const {ctype}* __restrict__ p{i}" if kind != "s" else f"const {compute} s{i}")
    params.append(f"{out_ctype}* __restrict__ out")
    params.append("const long long n")
    repeats = any(kind == "b" for _, _, kind in inputs)
    if repeats:
        params.append("const long long m")
    signature = ", ".join(params)
    arrays = [i for i, (_, _, kind) in enumerate(inputs) if kind != "s"]
    halves = "".join(_HALF_SOURCES[t] for t in sorted({c for c, _, _ in inputs} | {out_ctype}) if t in _HALF_SOURCES)

    def reads(index_of):
        lines = []
        for i, (ctype, compute, kind) in enumerate(inputs):
            lines.append(f"const {compute} in{i} = {_load(ctype, index_of(i)) if kind != 's' else f's{i}'};")
        return " ".join(lines)

    def element(i, j):
        return f"p{i}[{j} % m]" if inputs[i][2] == "b" else f"p{i}[{j}]"

    def pack(i):
        return "i % mv" if inputs[i][2] == "b" else "i"

    loads = "\n".join(
        f"            if (i < nv) l{i}[u] = reinterpret_cast<const ember_pack<{inputs[i][0]}, W>*>(p{i})[{pack(i)}];"
        for i in arrays
    )
    pack_decls = "\n".join(f"    ember_pack<{inputs[i][0]}, W> l{i}[U];" for i in arrays)
    return f"""{_PACK}{halves}
extern "C" __global__ void {name}_v({signature}) {{
    constexpr int W = {width};
    constexpr int U = {UNROLL};
    const long long nv = n / W;
{"    const long long mv = m / W;" if repeats else ""}
    const long long first = (long long)blockIdx.x * (blockDim.x * U) + threadIdx.x;
{pack_decls}
    #pragma unroll
    for (int u = 0; u < U; ++u) {{
        const long long i = first + (long long)u * blockDim.x;
{loads}
    }}
    #pragma unroll
    for (int u = 0; u < U; ++u) {{
        const long long i = first + (long long)u * blockDim.x;
        if (i < nv) {{
            ember_pack<{out_ctype}, W> r;
            #pragma unroll
            for (int k = 0; k < W; ++k) {{
                {reads(lambda i: f"l{i}[u].v[k]")}
                {_store(out_ctype, "r.v[k]", expr)}
            }}
            reinterpret_cast<ember_pack<{out_ctype}, W>*>(out)[i] = r;
        }}
    }}
    if (blockIdx.x == 0) {{
        for (long long j = nv * W + threadIdx.x; j < n; j += blockDim.x) {{
            {reads(lambda i: element(i, "j"))}
            {_store(out_ctype, "out[j]", expr)}
        }}
    }}
}}

extern "C" __global__ void {name}_s({signature}) {{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += step) {{
        {reads(lambda i: element(i, "j"))}
        {_store(out_ctype, "out[j]", expr)}
    }}
}}
"""


def _compile(kind, dtype, layout, out_dtype):
    """Compile (once) the kernels of ``kind`` for ``dtype``; ``layout`` is a string of operand kinds:
    ``a`` an array of ``dtype``, ``b`` one repeated along the output (see :func:`_source`), ``m`` a bool
    array, ``s`` a scalar of ``dtype``."""
    key = (kind, dtype, layout)
    entry = compiled.get(key, False)
    if entry is not False:
        return entry
    ctype, compute = _CTYPE[dtype], _compute(dtype)
    inputs = [(("bool", "bool", "a") if c == "m" else (ctype, _CTYPE[compute], c)) for c in layout]
    widest = max([dtype.itemsize if c != "m" else 1 for c in layout] + [out_dtype.itemsize])
    width = 16 // widest
    name = f"ember_{kind}_{layout}_{ctype}"
    source = _source(name, _expression(kind, compute), inputs, _CTYPE[out_dtype], width)
    try:
        module = _cp.RawModule(code=source, options=("--fmad=false",))
        vector = module.get_function(f"{name}_v")
        entry = (vector, module.get_function(f"{name}_s"), width, widest * width)
    except Exception as exc:  # a kernel that does not build leaves its calls to the generic path
        warnings.warn(f"ember: the fast CUDA kernel {name} did not compile ({type(exc).__name__}: {exc}); "
                      "its calls take the generic path", RuntimeWarning, stacklevel=3)
        entry = None
    compiled[key] = entry
    return entry


# --------------------------------------------------------------------------- launching


def _launch(entry, operands, arrays, out, n, repeat=None):
    """Run a compiled kernel over ``n`` elements: packed when every array is aligned to a pack (and, for a
    kernel with a repeated ``b`` operand of ``repeat`` elements, ``repeat`` is a whole number of packs).

    Returns ``out``, or None when the kernel did not compile (the caller then takes the generic path).
    """
    if entry is None:
        return None
    vector, single, width, align = entry
    if n == 0:
        return out
    mask = out.data.ptr
    for a in arrays:
        mask |= a.data.ptr
    sizes = (np.int64(n),) if repeat is None else (np.int64(n), np.int64(repeat))
    if mask % align == 0 and (repeat is None or repeat % width == 0):
        per_block = THREADS * UNROLL
        blocks = (n // width + per_block - 1) // per_block or 1  # one pass (a grid-stride loop measured slower)
        vector((blocks,), (THREADS,), (*operands, out, *sizes))
    else:
        blocks = min((n + THREADS - 1) // THREADS, 65536)
        single((blocks,), (THREADS,), (*operands, out, *sizes))
    return out


def _repeats_along(small, big):
    """Whether an array of shape ``small`` broadcast to shape ``big`` is ``small``'s elements repeated in
    order (``small``, without its leading 1s, is a suffix of ``big``, and has no more dims than ``big``)."""
    if len(small) > len(big):
        return False
    k = 0
    while k < len(small) and small[k] == 1:
        k += 1
    core = small[k:]
    return big[len(big) - len(core):] == core


def _broadcast_binary(kind, a, b, compare):
    """The fast kernel of ``a <kind> b`` for two contiguous arrays of one float dtype whose shapes differ, one
    of them repeated along the other (``x + bias``, ``scores + mask``); None for other shapes."""
    if b.dtype is not a.dtype or not _usable(a) or not _usable(b):
        return None
    dtype = a.dtype
    if _repeats_along(b.shape, a.shape):
        layout, shape, m = "ab", a.shape, b.size
    elif _repeats_along(a.shape, b.shape):
        layout, shape, m = "ba", b.shape, a.size
    else:
        return None
    out = _ndarray(shape, _BOOL if compare else dtype)
    return _launch(_compile(kind, dtype, layout, out.dtype), (a, b), (a, b), out, out.size, repeat=m)


def _usable_any_gpu(a):
    """Whether CuPy array ``a`` suits a fast kernel: C-contiguous, on the current GPU."""
    return a._c_contiguous and a.data.device_id == _get_device()


def _usable_one_gpu(a):
    """:func:`_usable_any_gpu` on a machine with one GPU, where every array is on the current one."""
    return a._c_contiguous


_usable = _usable_any_gpu  # register() picks _usable_one_gpu where CuPy sees a single GPU


def _scalar_operand(x, dtype):
    """A Python int/float as a scalar of the type the kernels compute ``dtype`` in (None for anything else):
    float32 for float16/bfloat16 tensors, as PyTorch keeps a Python number in its kernels' float32."""
    t = type(x)
    if t is float or (t is int and -(2**24) <= x <= 2**24):
        return _compute(dtype).type(x)
    return None


# --------------------------------------------------------------------------- fast functions


def _binary(kind, *, scalars, compare=False):
    """``fast(input, other)`` of a binary op: two tensors of one float dtype and shape, a float tensor and a
    Python number (either order, when ``scalars``), or, for ``mul``, a float tensor and a bool tensor."""
    mask_ok = kind == "mul"

    def fast(input, other):
        if type(input) is Tensor:
            a = input._data
            if type(a) is not _ndarray:
                return None
            dtype = a.dtype
            if not _is_float(dtype):
                if mask_ok and dtype is _BOOL and type(other) is Tensor:
                    b = other._data
                    if type(b) is _ndarray and _is_float(b.dtype) and a.shape == b.shape:
                        if _usable(a) and _usable(b):
                            out = _ndarray(b.shape, b.dtype)
                            return _launch(_compile("mask_mul", b.dtype, "ma", b.dtype), (a, b), (a, b), out, b.size)
                return None
            if type(other) is Tensor:
                b = other._data
                if type(b) is not _ndarray:
                    return None
                if a.shape != b.shape:
                    return _broadcast_binary(kind, a, b, compare)
                if not _usable(a) or not _usable(b):
                    return None
                if b.dtype is dtype:
                    layout = "aa"
                elif mask_ok and b.dtype is _BOOL:
                    kind_ = "mul_mask"
                    out = _ndarray(a.shape, dtype)
                    return _launch(_compile(kind_, dtype, "am", dtype), (a, b), (a, b), out, a.size)
                else:
                    return None
                out = _ndarray(a.shape, _BOOL if compare else dtype)
                return _launch(_compile(kind, dtype, layout, out.dtype), (a, b), (a, b), out, a.size)
            if not scalars:
                return None
            s = _scalar_operand(other, dtype)
            if s is None or (compare and float(s) != other) or not _usable(a):
                return None
            out = _ndarray(a.shape, _BOOL if compare else dtype)
            return _launch(_compile(kind, dtype, "as", out.dtype), (a, s), (a,), out, a.size)
        if scalars and not compare and type(other) is Tensor:
            b = other._data
            if type(b) is not _ndarray or not _is_float(b.dtype):
                return None
            s = _scalar_operand(input, b.dtype)
            if s is None or not _usable(b):
                return None
            out = _ndarray(b.shape, b.dtype)
            return _launch(_compile(kind, b.dtype, "sa", b.dtype), (s, b), (b,), out, b.size)
        return None

    fast.__name__ = f"{kind}_cuda_fast"
    return fast


def _float_pair(x, y):
    """The arrays of plain tensors ``x`` and ``y`` when both are usable float CuPy arrays of one dtype
    and shape (a fast kernel's two operands), else None."""
    if type(x) is not Tensor or type(y) is not Tensor:
        return None
    a, b = x._data, y._data
    if type(a) is not _ndarray or type(b) is not _ndarray:
        return None
    dtype = a.dtype
    if not _is_float(dtype) or b.dtype is not dtype or a.shape != b.shape:
        return None
    return (a, b) if _usable(a) and _usable(b) else None


def _with_alpha(kind):
    """``fast(input, other, alpha)`` of ``add``/``sub`` with a real ``alpha`` other than 1: two tensors only."""

    def fast(input, other, alpha):
        pair = _float_pair(input, other)
        if pair is None:
            return None
        a, b = pair
        dtype = a.dtype
        s = _scalar_operand(alpha, dtype)
        if s is None:
            return None
        out = _ndarray(a.shape, dtype)
        return _launch(_compile(kind, dtype, "aas", dtype), (a, b, s), (a, b), out, a.size)

    fast.__name__ = f"{kind}_cuda_fast"
    return fast


_ALPHA = {"add": _with_alpha("add_alpha"), "sub": _with_alpha("sub_alpha")}


def _unary(kind):
    """``fast(input)`` of a unary op on a contiguous float tensor."""

    def fast(input):
        if type(input) is not Tensor:
            return None
        a = input._data
        if type(a) is not _ndarray or not _is_float(a.dtype) or not _usable(a):
            return None
        out = _ndarray(a.shape, a.dtype)
        return _launch(_compile(kind, a.dtype, "a", a.dtype), (a,), (a,), out, a.size)

    fast.__name__ = f"{kind}_cuda_fast"
    return fast


def convert(a, dtype):
    """``a.astype(dtype)`` of a CuPy array between float32 and float16/bfloat16 (either way) in one vectorised
    pass, for a C-contiguous ``a`` on the current GPU: widening is exact, narrowing rounds to nearest even (the
    values of CuPy's ``astype``). None for other dtypes and layouts."""
    if _cp is None or not _usable(a):
        return None
    source = a.dtype
    if not ((source is _F32 and _is_half(dtype)) or (dtype is _F32 and _is_half(source))):
        return None
    out = _ndarray(a.shape, dtype)
    return _launch(_compile(f"to_{dtype.name}", source, "a", dtype), (a,), (a,), out, a.size)


def _relu_fast(input, inplace=False):
    if inplace is not False:
        return None
    return _relu_unary(input)


def _silu_fast(input, inplace=False):
    if inplace is not False:
        return None
    return _silu_unary(input)


def _gelu_fast(input, approximate="none"):
    if approximate == "none":
        return _gelu_none(input)
    if approximate == "tanh":
        return _gelu_tanh(input)
    return None


def _where_fast(condition, input, other):
    if type(condition) is not Tensor or type(input) is not Tensor or type(other) is not Tensor:
        return None
    c, a, b = condition._data, input._data, other._data
    if type(c) is not _ndarray or type(a) is not _ndarray or type(b) is not _ndarray:
        return None
    dtype = a.dtype
    if not _is_float(dtype) or b.dtype is not dtype or c.dtype is not _BOOL:
        return None
    if a.shape != b.shape or c.shape != a.shape or not (_usable(a) and _usable(b) and _usable(c)):
        return None
    out = _ndarray(a.shape, dtype)
    return _launch(_compile("where", dtype, "maa", dtype), (c, a, b), (c, a, b), out, a.size)


def _backward_from_output(kind):
    def fast(grad_output, output):
        pair = _float_pair(grad_output, output)
        if pair is None:
            return None
        g, y = pair
        dtype = g.dtype
        out = _ndarray(g.shape, dtype)
        return _launch(_compile(kind, dtype, "aa", dtype), (g, y), (g, y), out, g.size)

    fast.__name__ = f"{kind}_cuda_fast"
    return fast


def _threshold_backward_fast(grad_output, output, threshold):
    pair = _float_pair(grad_output, output)
    if pair is None:
        return None
    g, y = pair
    s = _scalar_operand(threshold, g.dtype)
    if s is None:
        return None
    out = _ndarray(g.shape, g.dtype)
    return _launch(_compile("threshold_backward", g.dtype, "aas", g.dtype), (g, y, s), (g, y), out, g.size)


def gelu_backward(grad, input, approximate):
    """gelu's input gradient for plain cuda tensors ``grad`` and ``input`` of one float dtype and shape in one
    fused kernel: the values of ember-autograd's formula (its eleven ops, each rounded to the dtype, in the same
    order; float16/bfloat16 computed in float32 and rounded once), or None for calls it does not take (then the
    formula runs)."""
    pair = _float_pair(grad, input)
    if pair is None or _cp is None:
        return None
    kind = {"none": "gelu_backward", "tanh": "gelu_tanh_backward"}.get(approximate)
    if kind is None:
        return None
    g, x = pair
    out = _ndarray(g.shape, g.dtype)
    result = _launch(_compile(kind, g.dtype, "aa", g.dtype), (g, x), (g, x), out, g.size)
    return None if result is None else Tensor._make(result, grad._device)


_relu_unary = _unary("relu")
_silu_unary = _unary("silu")
_gelu_none = _unary("gelu")
_gelu_tanh = _unary("gelu_tanh")

#: op name -> the fast function (positional arguments of a call without keywords)
FAST_OPS = {
    "add": _binary("add", scalars=True),
    "sub": _binary("sub", scalars=True),
    "mul": _binary("mul", scalars=True),
    "div": _binary("div", scalars=True),
    "gt": _binary("gt", scalars=True, compare=True),
    "ge": _binary("ge", scalars=True, compare=True),
    "lt": _binary("lt", scalars=True, compare=True),
    "le": _binary("le", scalars=True, compare=True),
    "neg": _unary("neg"),
    "exp": _unary("exp"),
    "tanh": _unary("tanh"),
    "sigmoid": _unary("sigmoid"),
    "relu": _relu_fast,
    "silu": _silu_fast,
    "gelu": _gelu_fast,
    "where": _where_fast,
    "tanh_backward": _backward_from_output("tanh_backward"),
    "sigmoid_backward": _backward_from_output("sigmoid_backward"),
    "threshold_backward": _threshold_backward_fast,
}

# keyword arguments a kernel call may carry that the fast function takes positionally, with their order
_KEYWORDS = {"add": ("alpha",), "sub": ("alpha",), "relu": ("inplace",), "silu": ("inplace",), "gelu": ("approximate",)}


def fast_function(name):
    """The fast function of op ``name`` (``fast(*args)`` -> CuPy array or None), for tests and benchmarks."""
    return FAST_OPS[name]


# --------------------------------------------------------------------------- registration


def _kernel(op, fast, generic):
    """The cuda kernel of ``op``: ``fast`` for the calls it takes, else ``generic``."""
    keywords = _KEYWORDS.get(op.name, ())
    alpha = _ALPHA.get(op.name)

    def kernel(*args, **kwargs):
        # a call without keywords gets here only after fast, the op's checked cuda kernel, declined it
        if alpha is not None:
            if len(kwargs) == 1 and "alpha" in kwargs and len(args) == 2:
                value = kwargs["alpha"]
                result = fast(*args) if type(value) is int and value == 1 else alpha(*args, value)
                if result is not None:
                    return result
        elif kwargs and keywords and all(k in keywords for k in kwargs):
            result = fast(*args, **kwargs)
            if result is not None:
                return result
        return generic(*args, **kwargs)

    kernel.__name__ = f"{op.name}_cuda"
    kernel._ember_fast_kernel = True
    return kernel


def _generic(op):
    """What the op ran on cuda before: its cuda kernel, its decomposition, or its CPU kernel on CuPy arrays."""
    previous = op.kernels.get("cuda")
    if previous is not None:
        return previous
    if op.decomposition is not None:
        return op.decomposition
    from .._backend import fallback_kernel

    return fallback_kernel(op)


def register():
    """Install the fast kernels (idempotent): the ops' checked cuda kernels and their cuda kernels."""
    global _cp, _ndarray, _get_device, _usable, _BF16
    from ..._ops import _dispatch
    from ..._ops._registry import registry
    from .._bf16 import BF16

    _BF16 = BF16
    _CTYPE[BF16] = "bf16"

    cp = cupy_module()
    _cp, _ndarray, _get_device = cp, cp.ndarray, cp.cuda.runtime.getDevice
    _usable = _usable_one_gpu if cp.cuda.runtime.getDeviceCount() == 1 else _usable_any_gpu
    _dispatch.set_device_array_type(cp.ndarray)
    for name, fast in FAST_OPS.items():
        op = registry.get(name)
        if op is None:
            continue
        current = op.kernels.get("cuda")
        if current is not None and getattr(current, "_ember_fast_kernel", False):
            continue  # installed already
        _installed[op] = current
        op.kernels["cuda"] = _kernel(op, fast, _generic(op))
        op.register_checked_kernel("cuda", fast)


@contextlib.contextmanager
def generic_only():
    """Within the block, the ops run as they did before :func:`register` (the generic path): for tests
    that compare the fast kernels with it, and for benchmarks of what they save."""
    saved = {}
    for op, previous in _installed.items():
        saved[op] = (op.kernels.get("cuda"), op.checked_kernels.pop("cuda", None))
        if previous is None:
            op.kernels.pop("cuda", None)
        else:
            op.kernels["cuda"] = previous
    try:
        yield
    finally:
        for op, (kernel, checked) in saved.items():
            op.kernels["cuda"] = kernel
            if checked is not None:
                op.register_checked_kernel("cuda", checked)
