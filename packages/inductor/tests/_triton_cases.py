"""Cases shared by the Triton tests (interpreter: test_triton_interpret.py; GPU: test_triton_cuda.py).

Importing this module imports no Triton (the interpreter tests set ``TRITON_INTERPRET`` first):
``run_op`` and ``check`` import it when they compile.

* :data:`OP_CASES` - every IR op of :data:`ember._inductor.ir.OPS` with a numpy oracle and inputs
  (:data:`INT_CASES`: the integer forms with rules of their own), run as a one-op kernel by :func:`run_op`;
* :data:`REDUCTIONS` / :data:`VARIANTS` - one function per reduction type, and the shapes that make a
  persistent, looped or split kernel;
* :func:`check` - compile a function with ``compile_fx`` and compare with eager.
"""

from __future__ import annotations

import math
import types

import numpy as np

import ember
from ember._inductor import autotune, ir
from ember._inductor.codegen import triton as tgen
from ember._inductor.compile_fx import compile_fx
from ember._inductor.runtime import triton_launch
from ember._inductor.scheduler import FusedKernel, SchedulerNode
from ember.fx.experimental.proxy_tensor import make_fx
from ember.testing import assert_close

__all__ = [
    "OP_CASES", "INT_CASES", "REDUCTIONS", "VARIANTS", "run_op", "check", "compile_checked", "flat_tensors",
    "sample_function",
]



def cuda_device():
    """ember's cuda device for a GPU test, or skip it: without Triton, under ``TRITON_INTERPRET`` (kernels
    would run on the CPU), or without a cuda device."""
    import os

    import pytest

    pytest.importorskip("triton", reason="Triton is not installed (pip install ember-inductor[triton])")
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        pytest.skip("TRITON_INTERPRET is set: kernels would not run on the GPU")
    if not ember.cuda.is_available():
        pytest.skip("no cuda device")
    return ember.device("cuda")

def compile_checked(fn, *inputs):
    """``compile_fx`` of ``make_fx(fn)``; asserts that no graph fell back to eager."""
    gm = make_fx(fn)(*inputs)
    compiled = compile_fx(gm, list(inputs))
    assert compiled.fallbacks == []
    return compiled


def check(fn, *inputs, rtol=1e-5, atol=1e-6):
    """Compile ``fn``, call it on ``inputs`` and compare with eager (dtype, shape, values); returns the outputs."""
    compiled = compile_checked(fn, *inputs)
    got, want = compiled(*inputs), fn(*inputs)
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True)
    return got


def check_layer_norm_grads(x, w, out_atol=1e-5, x_atol=1e-4):
    """``layer_norm(x, (n,), w)`` compiled against eager: the output and the gradients of ``sum(out ** 2)``
    with respect to ``x`` and ``w`` (both ``requires_grad``; ``n`` is ``x``'s last size)."""
    n = x.shape[-1]

    def fn(a, weight):
        return ember.nn.functional.layer_norm(a, (n,), weight)

    out = compile_checked(fn, x, w)(x, w)
    (out * out).sum().backward()
    grads = [x.grad.clone(), w.grad.clone()]
    x.grad = w.grad = None
    ref = fn(x, w)
    (ref * ref).sum().backward()
    assert_close(out, ref, rtol=1e-4, atol=out_atol)
    assert_close(grads[0], x.grad, rtol=1e-3, atol=x_atol)
    assert_close(grads[1], w.grad, rtol=1e-3, atol=1e-3)


# --------------------------------------------------------------------------------------------
# every IR op, as a one-op kernel, against numpy


def run_op(name, arrays, out_dtype, device="cpu"):
    """``name`` applied elementwise to ``arrays`` (1-D numpy) by a generated kernel; returns numpy."""
    tensors = [ember.from_numpy(a).to(device) for a in arrays]
    n = len(arrays[0])
    x0 = ir.index_vars(1, "x")[0]
    inputs = [ir.InputBuffer(f"in{k}", t.dtype, [n], [1], position=k) for k, t in enumerate(tensors)]
    body = ir.Op(name, tuple(ir.Load(b, (x0,)) for b in inputs), out_dtype)
    out_buf = ir.ComputedBuffer("out", out_dtype, [n], ir.Pointwise([n], body))
    kernel = FusedKernel("kernel0", [n])
    kernel.nodes.append(SchedulerNode(out_buf, body, (x0,)))
    source = tgen.generate(types.SimpleNamespace(steps=[kernel]))
    (ksrc,) = source.steps[0]
    module = triton_launch.load_module(source.source)
    out = ember.empty(n, dtype=out_dtype, device=device)
    values = {f"in{k}": t for k, t in enumerate(tensors)} | {"out": out}
    flag = ember.zeros(1, dtype=ember.int32, device=device)
    ptrs = [triton_launch.BufferArg(values[b]) for b in ksrc.buffers]
    ptrs += [triton_launch.BufferArg(flag)] if ksrc.error_flag else []  # integer division's zero flag
    args = ptrs + [int(s) for s in ksrc.sizes]
    cfg = autotune.configs("pointwise", n, None)[0]
    if out.device.type == "cuda":
        triton_launch.use_ember_stream()
    triton_launch.launch(getattr(module, ksrc.name), ksrc, args, cfg, n)
    return out.cpu().numpy()


_F = np.float32
_RNG = np.random.default_rng(0)
_ANY = np.concatenate([np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.5, 3.5], _F),
                       _RNG.uniform(-4, 4, 24).astype(_F)])
_POS = np.abs(_ANY) + _F(0.1)
_UNIT = np.clip(_ANY / 4.5, -0.99, 0.99).astype(_F)
_INTS = np.array([7, -7, 3, -3, 0, 12, -12, 5, 1, -1, 9, 100], np.int64)
_DIVS = np.array([2, 2, -2, -2, 3, 5, 5, -5, 1, -1, 4, 7], np.int64)
_BOOLS = np.array([True, False, True, True, False, False, True, False], np.bool_)
_BOOLS2 = np.array([True, True, False, True, False, True, False, False], np.bool_)


def _lgamma(x):
    return np.array([math.lgamma(v) for v in x], x.dtype)


def _erf(x):
    return np.array([math.erf(v) for v in x], x.dtype)


def _erfc(x):
    return np.array([math.erfc(v) for v in x], x.dtype)


def _erfinv(x):
    from scipy.special import erfinv  # noqa: PLC0415 - optional, only for this row

    return erfinv(x).astype(x.dtype)


def _pyfloordiv(a, b):
    return np.floor_divide(a, b)


F32, I64, B = ember.float32, ember.int64, ember.bool

# the random ops' arguments: seeds (int64, the high bit set in some), element offsets (some past 2**32)
# and node ordinals
_SEEDS = np.array([0, 1, -1, 2**62 + 12345, -(2**63), 67280421310721] * 4, np.int64)
_OFFSETS = np.array([0, 1, 2, 3, 2**32, 2**32 + 7, 12345678901, 99] * 3, np.int64)
_ORDINALS = np.array([0, 1, 2, 7] * 6, np.int64)


def _philox_word_uniforms(seed, word, stream):
    """The float32 uniforms of stream words ``W[word]``: word ``word & 3`` of the block of counter
    ``(lo32(word >> 2), hi32(word >> 2), stream, 0)`` (the reference ember.cuda.kernels.philox.philox4x32_10)."""
    from ember.cuda.kernels.philox import philox4x32_10  # noqa: PLC0415 - the oracle's import

    low = np.uint64(0xFFFFFFFF)
    s, m, k = (a.astype(np.int64).view(np.uint64) for a in (seed, word, stream))
    b = m >> np.uint64(2)
    counter = np.stack([b & low, b >> np.uint64(32), k & low, np.zeros_like(b)], -1)
    key = np.stack([s & low, s >> np.uint64(32)], -1)
    words = philox4x32_10(counter.astype(np.uint32), key.astype(np.uint32))
    picked = words[np.arange(len(m)), (m & np.uint64(3)).astype(np.int64)]
    return (picked >> 8).astype(np.float32) * np.float32(2.0**-24)


def _philox_rand(seed, offset, stream):
    return _philox_word_uniforms(seed, offset, stream)  # element i: W[i]


def _philox_randn(seed, offset, stream):
    # element i: Box-Muller of W[2i] and W[2i + 1]
    u0 = _philox_word_uniforms(seed, 2 * offset, stream)
    u1 = _philox_word_uniforms(seed, 2 * offset + 1, stream)
    angle = (np.float32(2 * math.pi) * u1).astype(np.float64)  # the kernels scale u1 in float32
    return np.sqrt(-2.0 * np.log((np.float32(1) - u0).astype(np.float64))) * np.cos(angle)


#: IR op -> (numpy oracle, input arrays, output dtype). Every name of ir.OPS has a row.
OP_CASES = {
    "add": (np.add, (_ANY, _ANY[::-1].copy()), F32),
    "sub": (np.subtract, (_ANY, _ANY[::-1].copy()), F32),
    "mul": (np.multiply, (_ANY, _ANY[::-1].copy()), F32),
    "truediv": (np.divide, (_ANY, _POS), F32),
    "floordiv": (_pyfloordiv, (_ANY, _ANY[::-1] + _F(0.25)), F32),
    "mod": (np.remainder, (_INTS, _DIVS), I64),
    "fmod": (np.fmod, (_ANY, _POS[::-1].copy()), F32),
    "remainder": (np.remainder, (_ANY, _ANY[::-1] + _F(0.25)), F32),
    "neg": (np.negative, (_ANY,), F32),
    "abs": (np.abs, (_ANY,), F32),
    "exp": (np.exp, (_ANY,), F32),
    "exp2": (np.exp2, (_ANY,), F32),
    "expm1": (np.expm1, (_ANY,), F32),
    "log": (np.log, (_POS,), F32),
    "log2": (np.log2, (_POS,), F32),
    "log10": (np.log10, (_POS,), F32),
    "log1p": (np.log1p, (_POS,), F32),
    "sqrt": (np.sqrt, (_POS,), F32),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (_POS,), F32),
    "reciprocal": (np.reciprocal, (_POS,), F32),
    "sin": (np.sin, (_ANY,), F32),
    "cos": (np.cos, (_ANY,), F32),
    "tan": (np.tan, (_UNIT,), F32),
    "asin": (np.arcsin, (_UNIT,), F32),
    "acos": (np.arccos, (_UNIT,), F32),
    "atan": (np.arctan, (_ANY,), F32),
    "sinh": (np.sinh, (_ANY,), F32),
    "cosh": (np.cosh, (_ANY,), F32),
    "tanh": (np.tanh, (_ANY,), F32),
    "asinh": (np.arcsinh, (_ANY,), F32),
    "acosh": (np.arccosh, (_POS + _F(1),), F32),
    "atanh": (np.arctanh, (_UNIT,), F32),
    "erf": (_erf, (_ANY,), F32),
    "erfc": (_erfc, (_ANY,), F32),
    "erfinv": (_erfinv, (_UNIT,), F32),
    "lgamma": (_lgamma, (_POS,), F32),
    "floor": (np.floor, (_ANY,), F32),
    "ceil": (np.ceil, (_ANY,), F32),
    "trunc": (np.trunc, (_ANY,), F32),
    "round": (np.round, (_ANY,), F32),
    "sign": (np.sign, (_ANY,), F32),
    "pow": (np.power, (_POS, _ANY), F32),
    "maximum": (np.maximum, (_ANY, _ANY[::-1].copy()), F32),
    "minimum": (np.minimum, (_ANY, _ANY[::-1].copy()), F32),
    "fmax": (np.fmax, (_ANY, _ANY[::-1].copy()), F32),
    "fmin": (np.fmin, (_ANY, _ANY[::-1].copy()), F32),
    "eq": (np.equal, (_ANY, np.round(_ANY)), B),
    "ne": (np.not_equal, (_ANY, np.round(_ANY)), B),
    "lt": (np.less, (_ANY, _ANY[::-1].copy()), B),
    "le": (np.less_equal, (_ANY, np.round(_ANY)), B),
    "gt": (np.greater, (_ANY, _ANY[::-1].copy()), B),
    "ge": (np.greater_equal, (_ANY, np.round(_ANY)), B),
    "logical_and": (np.logical_and, (_BOOLS, _BOOLS2), B),
    "logical_or": (np.logical_or, (_BOOLS, _BOOLS2), B),
    "logical_not": (np.logical_not, (_BOOLS,), B),
    "logical_xor": (np.logical_xor, (_BOOLS, _BOOLS2), B),
    "bitwise_and": (np.bitwise_and, (_INTS, _DIVS), I64),
    "bitwise_or": (np.bitwise_or, (_INTS, _DIVS), I64),
    "bitwise_xor": (np.bitwise_xor, (_INTS, _DIVS), I64),
    "bitwise_not": (np.invert, (_INTS,), I64),
    "lshift": (np.left_shift, (_INTS, np.abs(_DIVS)), I64),
    "rshift": (np.right_shift, (_INTS, np.abs(_DIVS)), I64),
    "where": (np.where, (_BOOLS, _ANY[:8].copy(), _ANY[8:16].copy()), F32),
    "to_dtype": (lambda x: x.astype(np.int64), (_ANY,), I64),
    "isnan": (np.isnan, (np.array([0.0, np.nan, np.inf, -1.0], _F),), B),
    "isinf": (np.isinf, (np.array([0.0, np.nan, np.inf, -np.inf], _F),), B),
    "isfinite": (np.isfinite, (np.array([0.0, np.nan, np.inf, -1.0], _F),), B),
    "atan2": (np.arctan2, (_ANY, _ANY[::-1].copy()), F32),
    "copysign": (np.copysign, (_ANY, _ANY[::-1].copy()), F32),
    "hypot": (np.hypot, (_ANY, _ANY[::-1].copy()), F32),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (_ANY,), F32),
    "philox_rand": (_philox_rand, (_SEEDS, _OFFSETS, _ORDINALS), F32),
    "philox_randn": (_philox_randn, (_SEEDS, _OFFSETS, _ORDINALS), F32),
}

#: Integer forms with their own rules (Python-style division and remainder, integer powers).
INT_CASES = {
    "to_dtype": (lambda x: x.astype(np.int64), (np.array([1.5, -2.5, np.nan, 1e30, -1e30, 3.0], np.float32),), I64),
    "floordiv": (np.floor_divide, (_INTS, _DIVS), I64),
    "remainder": (np.remainder, (_INTS, _DIVS), I64),
    "fmod": (np.fmod, (_INTS, _DIVS), I64),
    "truediv": (lambda a, b: np.trunc(a / b).astype(np.int64), (_INTS, _DIVS), I64),
    "pow": (np.power, (_INTS, np.abs(_DIVS)), I64),
    "maximum": (np.maximum, (_INTS, _DIVS), I64),
    "abs": (np.abs, (_INTS,), I64),
    "sign": (np.sign, (_INTS,), I64),
}



REDUCTIONS = {
    "sum": lambda a: a.sum(1),
    "prod": lambda a: (a * 0.1 + 1).prod(1),
    "max": lambda a: a.amax(1),
    "min": lambda a: a.amin(1),
    "argmax": lambda a: a.argmax(1),
    "argmin": lambda a: a.argmin(1),
    "any": lambda a: (a > 2.0).any(1),
    "all": lambda a: (a > -2.5).all(1),
    "mean": lambda a: a.mean(1),
}

# (rows, row length, expected kernel kind)
#: kernel kind -> (rows, row length) that makes it
VARIANTS = {"persistent": (6, 50), "looped": (3, tgen.PERSISTENT_LIMIT + 300),
            "split": (1, tgen.SPLIT_MIN_ELEMENTS + 7)}


def flat_tensors(value):
    """The tensors of an op's result (a tensor or nested lists/tuples of them), in order.

    Raises:
        TypeError: for a result that holds anything else (a bool, a number).
    """
    if isinstance(value, ember.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flat_tensors(v)]
    raise TypeError(type(value).__name__)


def sample_function(info, sample):
    """``(fn, tensors)``: ``fn(*tensors)`` calls the op on the sample with those tensors in place."""
    structure = (sample.input, tuple(sample.args), dict(sample.kwargs))
    tensors = []

    def collect(v):
        if isinstance(v, ember.Tensor):
            tensors.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                collect(x)
        elif isinstance(v, dict):
            for x in v.values():
                collect(x)

    def rebuild(v, it):
        if isinstance(v, ember.Tensor):
            return next(it)
        if isinstance(v, (list, tuple)):
            return type(v)(rebuild(x, it) for x in v)
        if isinstance(v, dict):
            return {k: rebuild(x, it) for k, x in v.items()}
        return v

    collect(structure)

    def fn(*inputs):
        inp, args, kwargs = rebuild(structure, iter(inputs))
        return info.op(inp, *args, **kwargs)

    return fn, tensors
