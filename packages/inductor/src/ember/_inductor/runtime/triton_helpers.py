"""Device functions the generated Triton kernels call, and the ``libdevice`` they use.

Generated kernels import this module as ``th``. It holds:

* ``th.libdevice``: NVIDIA's libdevice (``triton.language.extra.libdevice``) on a GPU; under Triton's
  interpreter (``TRITON_INTERPRET=1``), which has no libdevice, an object with the same function names
  computed by numpy on the interpreter's arrays (:class:`InterpreterLibdevice`). The kernel source is
  the same either way.
* ``@triton.jit`` helpers for the ops whose ember semantics need more than one Triton op (NaN-propagating
  maximum, Python-style floor division and remainder, integer powers) and the combine functions of
  reductions (``prod``, NaN-propagating ``max``/``min``, first-index ``argmax``/``argmin``).
"""

from __future__ import annotations

import os

import numpy as np
import triton
import triton.language as tl

__all__ = ["libdevice", "interpreting", "InterpreterLibdevice"]


def interpreting() -> bool:
    """Whether kernels run in Triton's interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip() not in ("", "0")


_NUMPY = {
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "expm1": np.expm1,
    "log1p": np.log1p, "log10": np.log10, "atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign,
    "fmod": np.fmod, "rint": np.rint, "trunc": np.trunc, "pow": np.power, "isinf": np.isinf,
}


def _special(name):
    import math

    fn = {"erfc": math.erfc, "lgamma": math.lgamma}[name]
    vec = np.vectorize(lambda v: fn(v) if not (name == "lgamma" and v <= 0 and v == int(v)) else np.inf)
    return vec


def _erfinv(x):
    # Newton steps on erf from a rough start; float64 throughout, so float32 results are exact to rounding
    import math

    erf = np.vectorize(math.erf)
    x = np.asarray(x, dtype=np.float64)
    out = np.full_like(x, np.nan)
    inside = np.abs(x) < 1
    y = np.where(inside, x, 0.0)
    w = -np.log((1 - y) * (1 + y))
    t = 2 / (np.pi * 0.147) - w / 2  # Winitzki's approximation, w = -log(1 - y^2)
    z = np.sign(y) * np.sqrt(np.sqrt(t * t + w / 0.147) - t)
    for _ in range(4):
        z = z - (erf(z) - y) / (2 / np.sqrt(np.pi) * np.exp(-z * z))
    out[inside] = z[inside]
    out[x == 1] = np.inf
    out[x == -1] = -np.inf
    return out


class InterpreterLibdevice:
    """libdevice's functions for Triton's interpreter, computed by numpy on the interpreter's arrays.

    Each function takes and returns interpreter tensors (``tl.tensor`` around a numpy array); the result
    has the first argument's dtype (``isinf`` returns int1), broadcast over the arguments' shapes.
    """

    def __getattr__(self, name):
        if name in _NUMPY:
            fn = _NUMPY[name]
        elif name in ("erfc", "lgamma"):
            fn = _special(name)
        elif name == "erfinv":
            fn = _erfinv
        else:
            raise AttributeError(f"InterpreterLibdevice: no function {name!r}")

        def call(*args):
            from triton.runtime.interpreter import TensorHandle

            first = args[0]
            with np.errstate(all="ignore"):
                data = np.asarray(fn(*[a.handle.data for a in args]))
            scalar = tl.int1 if name == "isinf" else getattr(first.dtype, "scalar", first.dtype)
            np_dtype = np.bool_ if name == "isinf" else first.handle.data.dtype
            data = data.astype(np_dtype)
            shape = [int(s) for s in data.shape]
            ty = tl.block_type(scalar, shape) if shape else scalar
            return tl.tensor(TensorHandle(data, scalar), ty)

        return call


if interpreting():
    libdevice = InterpreterLibdevice()
else:  # pragma: no cover - needs a GPU
    from triton.language.extra import libdevice  # noqa: F401


# --------------------------------------------------------------------------------------------
# pointwise helpers (ember's semantics: NaN propagates, Python-style floor division and remainder)


@triton.jit
def maximum(a, b):
    """NaN-propagating maximum (a NaN in either argument gives NaN)."""
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def minimum(a, b):
    """NaN-propagating minimum."""
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def fmax(a, b):
    """Maximum ignoring a NaN argument (C's fmax)."""
    return tl.where((a > b) | (b != b), a, b)


@triton.jit
def fmin(a, b):
    """Minimum ignoring a NaN argument (C's fmin)."""
    return tl.where((a < b) | (b != b), a, b)


@triton.jit
def int_floordiv(a, b):
    """Integer ``a // b`` rounding toward minus infinity (Triton's ``//`` truncates, as C); 0 for b == 0."""
    safe = tl.where(b == 0, 1, b)
    q = a // safe
    r = a % safe
    q = tl.where((r != 0) & ((r < 0) != (safe < 0)), q - 1, q)
    return tl.where(b == 0, 0, q)


@triton.jit
def int_remainder(a, b):
    """Integer remainder with the divisor's sign (Python's ``%``); 0 for b == 0."""
    safe = tl.where(b == 0, 1, b)
    r = a % safe
    r = tl.where((r != 0) & ((r < 0) != (safe < 0)), r + safe, r)
    return tl.where(b == 0, 0, r)


@triton.jit
def int_truncdiv(a, b):
    """Integer division truncating toward zero; 0 for b == 0 (eager raises; kernels cannot)."""
    safe = tl.where(b == 0, 1, b)
    return tl.where(b == 0, 0, a // safe)


@triton.jit
def int_fmod(a, b):
    """Integer remainder with the dividend's sign (C's ``%``); 0 for b == 0."""
    safe = tl.where(b == 0, 1, b)
    return tl.where(b == 0, 0, a % safe)


@triton.jit
def float_floordiv(a, b):
    """Float ``a // b`` as numpy's floor_divide: from fmod, so ``inf // 2`` is NaN."""
    mod = libdevice.fmod(a, b)
    div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    whole = tl.floor(div)
    whole = tl.where(div - whole > 0.5, whole + 1, whole)
    zero = libdevice.copysign(tl.zeros_like(div), a / b)
    out = tl.where(div == 0, zero, whole)
    return tl.where(b == 0, a / b, out)


@triton.jit
def float_remainder(a, b):
    """Float remainder with the divisor's sign; a zero remainder is +0."""
    r = libdevice.fmod(a, b)
    r = tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
    return tl.where(r == 0, tl.zeros_like(r), r)


@triton.jit
def int_pow(a, b):
    """``a ** b`` for integers (exponentiation by squaring over 64 bits; a negative b gives 0, 1 or -1)."""
    result = tl.full(a.shape, 1, a.dtype) + a * 0
    base = a
    e = b + a * 0
    for _ in tl.static_range(64):
        result = tl.where((e & 1) != 0, result * base, result)
        base = base * base
        e = e >> 1
    neg = tl.where(a == 1, 1, tl.where(a == -1, tl.where((b % 2) != 0, -1, 1), 0))
    return tl.where(b < 0, neg.to(result.dtype), result)


@triton.jit
def sign(a):
    """-1, 0 or 1 (NaN gives 0)."""
    return ((a > 0).to(a.dtype) - (a < 0).to(a.dtype))


@triton.jit
def round_half_even(a):
    """Round to the nearest integer, ties to even (``torch.round``)."""
    return libdevice.rint(a)


# --------------------------------------------------------------------------------------------
# reduction combine functions


@triton.jit
def combine_sum(a, b):
    """``a + b``."""
    return a + b


@triton.jit
def combine_prod(a, b):
    """``a * b``."""
    return a * b


@triton.jit
def combine_max(a, b):
    """NaN-propagating maximum (associative: NaN wins)."""
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def combine_min(a, b):
    """NaN-propagating minimum."""
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def combine_argmax(av, ai, bv, bi):
    """The (value, index) pair of the first maximum; the first NaN wins over any number."""
    a_nan = av != av
    b_nan = bv != bv
    better = (av > bv) | ((av == bv) & (ai < bi))
    pick_a = tl.where(a_nan, (~b_nan) | (ai < bi), (~b_nan) & better)
    return tl.where(pick_a, av, bv), tl.where(pick_a, ai, bi)


@triton.jit
def combine_argmin(av, ai, bv, bi):
    """The (value, index) pair of the first minimum; the first NaN wins over any number."""
    a_nan = av != av
    b_nan = bv != bv
    better = (av < bv) | ((av == bv) & (ai < bi))
    pick_a = tl.where(a_nan, (~b_nan) | (ai < bi), (~b_nan) & better)
    return tl.where(pick_a, av, bv), tl.where(pick_a, ai, bi)
